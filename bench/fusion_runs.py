"""The fusion stage run after run: what each 15-minute micro-batch refits, how long it takes, and how many
fused objects' screening element sets it renews (issue 38, points 3 and 6).

    .venv/bin/python bench/fusion_runs.py [--objects 300] [--hours 3] [--cadence-minutes 15] [--warm-hours 0]
                                          [--catalogue generated|reference] [--seed 2] [--renew-m M]
                                          [--work DIR] [--out FILE]

The simulator writes ``--hours`` of sensors over a generated catalogue of ``--objects`` (``make run``'s size by
default), or with ``--catalogue reference`` over a random slice of ``--objects`` of the real 13,407-object
catalogue (../shared/data/catalog), the whole of which is loaded and screened (``bench/catalogue_runs.py`` runs
several sizes); element sets 0.5-3 days old; no disorder (a re-ordered or late file holds observations of other
times than its name says, which landing by name would turn into late data). The files land one cadence at a
time, by the time in their names, and after each landing the stages run as the DAG runs them (every stage of
sda.pipeline.topology up to conjunction, the screening starting at the slice's end, 24 h horizon; the catalogue
file, which does not change, is loaded once before the first run), in one lakehouse on the benchmark's own Spark
Connect server. Per run: each stage's seconds; the fuse stage's objects and windows refitted, converged; the
conjunction stage's fused objects, renewed and kept element sets (``renew_fraction`` = renewed / catalogue
objects: what ``bench/screening.py --renew-fraction`` takes); the alerts the run opened, updated and closed;
``total_s``, the stages' sum; and the memory peaks so far (``bench/throughput_measure.memory_now``: the server
JVM's VmHWM, its Python workers' largest summed Pss, this process's VmHWM). Airflow is not in the loop, nor the
quality gates (its tasks, not stages): ``bench/latency.py`` measures those.

With ``--warm-hours H`` the first run takes the first H hours at once (a catalogue tracked that long
before; ``--hours`` counts them), and the runs after it are the steady state: what a run refits and renews
once the objects are fused (``median_fuse_share``: objects refitted per run over ``--objects``;
``median_fuse_conjunction_s_per_object``: (fuse + conjunction seconds) / objects refitted, median over runs).

Prints a line per run and, last, one JSON line (per-run rows, medians over the runs after the first);
the same JSON goes to ``--out`` (default ``bench/results/fusion_runs.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
from common import RESULTS, WORK, iso_z, log, reference_catalogue, run_stage, stage_argv, write_result
from throughput_measure import WorkerPeak, memory_now

from sda.pipeline.topology import stages_upto

# what a run runs, as the DAG does; not catalog: its file does not change, it is loaded once before the runs
STAGES = tuple(stage for stage in stages_upto("conjunction") if stage != "catalog")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=300)
    p.add_argument("--hours", type=float, default=3.0)
    p.add_argument("--cadence-minutes", type=float, default=15.0)
    p.add_argument("--warm-hours", type=float, default=0.0,
                   help="land the first HOURS at once in the first run (a catalogue already tracked that long: "
                        "the runs after it show the steady state; default 0, every object starts from its "
                        "element set); the medians are over the runs after the first")
    p.add_argument("--catalogue", choices=("generated", "reference"), default="generated",
                   help="generated (default): a synthetic catalogue; reference: a random --objects slice of "
                        "../shared/data/catalog")
    p.add_argument("--seed", type=int, default=2)
    p.add_argument("--start", default="2026-11-21T06:00:00Z")
    p.add_argument("--renew-m", type=float, default=None, help="settings.fusion_renew_m (default: the setting's)")
    p.add_argument("--work", type=Path, default=WORK / "fusion_runs")
    p.add_argument("--out", type=Path, default=RESULTS / "fusion_runs.json")
    return p


def file_time(name: str) -> dt.datetime | None:
    found = re.search(r"_(\d{8}T\d{6}Z)", name)
    return None if found is None else dt.datetime.strptime(found.group(1), "%Y%m%dT%H%M%SZ").replace(
        tzinfo=dt.timezone.utc)


def land(files: list[Path], staging: Path, landing: Path) -> None:
    for src in files:
        target = landing / src.relative_to(staging)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        os.utime(target, (946684800, 946684800))


def one_run(spark, settings, k: int, slice_end: dt.datetime) -> dict:
    out = {"run": k, "slice_end": slice_end.isoformat()}
    screen = iso_z(slice_end)
    for stage in STAGES:
        extra = ["--screen-start", screen] if stage == "conjunction" else []
        started = time.monotonic()
        m = run_stage(spark, settings, stage, stage_argv(stage, settings, f"run-{k}", *extra))
        out[f"{stage}_s"] = round(time.monotonic() - started, 2)
        if stage == "fuse":
            out.update(fuse_objects=m.get("objects", 0), fuse_windows=m.get("windows", 0),
                       fuse_converged=m.get("converged", 0))
        if stage == "conjunction":
            out.update(fused=m.get("fused_objects", 0), renewed=m.get("fused_renewed", 0),
                       kept=m.get("fused_kept", 0), catalogue=m.get("objects", 0), screening=m.get("mode"),
                       events=m.get("events", 0), **{k: m.get(k, 0) for k in ALERT_KEYS})
    out["renew_fraction"] = round(out["renewed"] / max(out["catalogue"], 1), 4)
    out["total_s"] = round(sum(out[f"{stage}_s"] for stage in STAGES), 2)
    return out


ALERT_KEYS = ("alerts_new", "alerts_updated", "alerts_closed")


def simulated(args, staging: Path, start: dt.datetime):
    """The sensors' files of the whole span in ``staging``; the simulation's summary."""
    from sda.sim.common import RATE_NAMES
    from sda.sim.simulate import SimConfig, simulate

    source = {}
    if args.catalogue == "reference":
        args.work.mkdir(parents=True, exist_ok=True)
        source = {"catalog": reference_catalogue(args.work / "reference.tle"), "max_objects": args.objects}
    return simulate(SimConfig(start=start, end=start + dt.timedelta(hours=args.hours), landing=staging,
                              catalog_out=args.work / "catalog.tle", objects=args.objects, seed=args.seed,
                              tle_age_days=(0.5, 3.0), reorder_rate=0.0, **source,
                              **{name: 0.0 for name in RATE_NAMES}))


def main(argv=None) -> dict:
    args = parser().parse_args(argv)
    from sda.config.settings import load_settings
    from sda.lake import server
    from sda.sim.common import parse_time

    shutil.rmtree(args.work, ignore_errors=True)
    staging = args.work / "staging"
    start = parse_time(args.start)
    began = time.monotonic()
    sim = simulated(args, staging, start)
    simulate_s = round(time.monotonic() - began, 1)
    settings = load_settings(env={}, lakehouse=args.work / "lakehouse", landing=args.work / "landing",
                             outbox=args.work / "outbox", catalog_file=sim.catalog_file, shuffle_partitions=4,
                             **({} if args.renew_m is None else {"fusion_renew_m": args.renew_m}))
    files = [p for p in staging.rglob("*") if p.is_file() and "_truth" not in p.parts and file_time(p.name)]
    rows = []
    with server.running(settings) as spark, \
            WorkerPeak(server.read_pid(settings)) as sampler:  # the settings' server (started if none answers)
        run_stage(spark, settings, "catalog", stage_argv("catalog", settings, "catalog-1"))
        step = dt.timedelta(minutes=args.cadence_minutes)
        k, slice_end = 0, start + (dt.timedelta(hours=args.warm_hours) if args.warm_hours > 0 else step)
        previous_end = start
        while slice_end <= start + dt.timedelta(hours=args.hours) + dt.timedelta(seconds=1):
            land([f for f in files if previous_end <= file_time(f.name) < slice_end], staging, settings.landing)
            row = {**one_run(spark, settings, k, slice_end), "memory": memory_now(sampler.server_pid, sampler)}
            log(json.dumps(row))
            rows.append(row)
            k, previous_end, slice_end = k + 1, slice_end, slice_end + step
    later = rows[1:] or rows

    def med(key: str) -> float:
        return round(float(np.median([r[key] for r in later])), 4)

    objects_fitted = max(sum(r["fuse_objects"] for r in later), 1)
    result = {"objects": args.objects, "catalogue": args.catalogue, "simulate_s": simulate_s,
              "airflow_in_loop": False, "hours": args.hours, "cadence_minutes": args.cadence_minutes,
              "warm_hours": args.warm_hours,
              "renew_m": settings.fusion_renew_m,
              "seed": args.seed, "runs": rows, "median_fuse_s": med("fuse_s"),
              "median_stage_s": {stage: med(f"{stage}_s") for stage in STAGES}, "median_total_s": med("total_s"),
              "alerts": {k: sum(r[k] for r in later) for k in ALERT_KEYS}, "memory": rows[-1]["memory"],
              "median_fuse_objects": med("fuse_objects"), "median_conjunction_s": med("conjunction_s"),
              "median_renewed": med("renewed"), "median_renew_fraction": med("renew_fraction"),
              "max_renew_fraction": max(r["renew_fraction"] for r in later),
              "mean_renew_fraction": round(float(np.mean([r["renew_fraction"] for r in later])), 4),
              "runs_measured": len(later),
              "median_fuse_share": round(float(np.median([r["fuse_objects"] for r in later])) / args.objects, 4),
              "fuse_s_per_object": round(sum(r["fuse_s"] for r in later) / objects_fitted, 3),
              # issue 50's figure: what a refitted object costs the fuse and conjunction stages together
              "median_fuse_conjunction_s_per_object": round(float(np.median(
                  [(r["fuse_s"] + r["conjunction_s"]) / max(r["fuse_objects"], 1) for r in later])), 3)}
    write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
