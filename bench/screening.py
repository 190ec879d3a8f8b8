"""Catalogue-scale conjunction screening against its floor: the real 13,407-object catalogue
(../shared/data/catalog, both files) screened all-vs-all over 24 h at 5 km on Spark, and in the same
run the bare SGP4 propagation of the same objects over the same time grid with ``SatrecArray``.

    .venv/bin/python bench/screening.py [--horizon-h 24] [--threshold-km 5] [--step-s SETTINGS]
                                        [--start 2025-10-04T00:00:00Z] [--repeat 2] [--out FILE]

What is timed (wall-clock seconds, best of ``--repeat``):

* ``screen_s`` -- :func:`jobs.conjunction.screen` in a warm ``local[2]`` Spark session: the element
  sets shipped to the executors, (a) altitude bands, (b) the spatial grid keyed by time step (each
  task propagates the catalogue over its block of steps and joins cells), (b') the straight-line
  bound, the shuffle of candidate (pair, step)s by pair and (c) the TCA refinement, up to the events
  in the driver. Not included: starting the JVM (printed apart as ``spark_start_s``), reading the
  gold catalogue table and writing the results (the job does both; they do not depend on the filter
  chain). Each run starts with an empty ephemeris cache (a temporary directory on this machine) and
  stores the catalogue's states on the focus grid in it, as the job does.
* ``floor_s`` -- ``SatrecArray.sgp4`` of every object at every grid time, in the chunks of steps the
  screening also uses, in this (single) Python process: the work no screening of this catalogue
  on this grid can skip. Spark runs the screening on both cores, the floor runs on one: the
  figures say so (``cores``) rather than pretend otherwise.
* ``incremental_run_s`` -- after that full screening is recorded as the screening state, the next
  run's screening one minute later with ``--renew-fraction`` (1 %) of the element sets renewed (a new
  epoch, :func:`sda.sim.tle_error.reepoch`): :func:`jobs.conjunction.screen_increment` -- the new
  minute all against all, the renewed objects against all over the whole horizon, the pairs whose
  events passed and the persistent pairs rechecked, the kept events combined -- from the plan to the
  open events in the driver (the same things not included as for ``screen_s``), reading the unchanged
  objects' states from the cache the full screening left (``incremental.ephemeris_states_read``).
  ``incremental_ratio`` is it over ``screen_s``.
* ``screen_cpu_s`` -- for the in-process chain (``sda.orbit.screening.screen``: the same functions on one
  core) when ``--local`` is given; it shows what the chain costs without Spark's parallelism.

Prints each figure as it goes and, last, one JSON line: ``objects``, ``events`` (open events of the
full screening), ``persistent`` (of them, persistent proximities), ``pairs_after_each_filter``,
``screen_s``, ``floor_s``, ``ratio_to_floor``, ``incremental_run_s`` and the context; the same
JSON goes to ``--out`` (default ``bench/results/screening.json``). Exits 2 with a message when the
reference catalogue is not there (a plain clone has no ../shared/data).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from common import RESULTS, log, parse_iso, reference_files, write_result


def load_reference_catalogue():
    from sda.orbit.catalog import latest_by_object, load_catalog

    entries, rejected = [], []
    for path in reference_files("bench/screening.py"):
        got, bad = load_catalog(path)
        entries += got
        rejected += bad
    if rejected:
        log(f"{len(rejected)} records rejected by the loader (first: {rejected[0].reason})")
    return latest_by_object(entries)


def floor_seconds(satrecs, times) -> float:
    import numpy as np
    from sgp4.api import SatrecArray

    from sda.orbit.frames import unix_to_jd
    from sda.orbit.screening.propagation import PROPAGATION_CHUNK_STEPS

    arr = SatrecArray(satrecs)
    t0 = time.perf_counter()
    for c0 in range(0, len(times), PROPAGATION_CHUNK_STEPS):
        jd, fr = unix_to_jd(np.asarray(times[c0:c0 + PROPAGATION_CHUNK_STEPS]))
        arr.sgp4(jd, fr)
    return time.perf_counter() - t0


def renewed_catalogue(entries, start: float, args) -> dict:
    """The catalogue with ``--renew-fraction`` of its element sets renewed (a deterministic sample):
    each re-epoched at the screening start, the same orbit (:func:`sda.sim.tle_error.reepoch`), so it
    is a new element set -- a new epoch -- for the screening state."""
    import numpy as np
    from sgp4 import exporter

    from sda.orbit import screening
    from sda.sim.tle_error import reepoch

    count = int(round(args.renew_fraction * len(entries)))
    chosen = set(np.random.default_rng(16).choice(len(entries), count, replace=False).tolist())
    ids, line1, line2, epochs = [], [], [], {}
    for k, e in enumerate(entries):
        if k in chosen:
            sat = reepoch(e.satrec, start + args.advance_s, start + args.advance_s)
            l1, l2 = exporter.export_tle(sat)
            epoch = start + args.advance_s
        else:
            l1, l2, epoch = e.line1, e.line2, e.epoch.timestamp()
        ids.append(e.norad_id)
        line1.append(l1)
        line2.append(l2)
        epochs[e.norad_id] = epoch
    return {"catalogue": screening.CatalogueLines(tuple(ids), tuple(line1), tuple(line2)), "epochs": epochs,
            "count": count}


def parse_args(argv):
    from sda.config.settings import load_settings

    defaults = load_settings(env={})
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--horizon-h", type=float, default=defaults.screening_horizon_h)
    p.add_argument("--threshold-km", type=float, default=defaults.screening_threshold_km)
    p.add_argument("--step-s", type=float, default=defaults.screening_step_s)
    p.add_argument("--start", default="2025-10-04T00:00:00Z",
                   help="screening start (the catalogue's median epoch is 2025-10-03)")
    p.add_argument("--repeat", type=int, default=2, help="time screen and floor this many times, keep the best")
    p.add_argument("--local", action="store_true", help="also time the in-process chain (one core, no Spark)")
    p.add_argument("--renew-fraction", type=float, default=0.01,
                   help="fraction of element sets renewed before the incremental run (default 0.01)")
    p.add_argument("--advance-s", type=float, default=60.0,
                   help="how far the incremental run's horizon moves (default 60 s)")
    p.add_argument("--out", type=Path, default=RESULTS / "screening.json")
    args = p.parse_args(argv)
    for name in ("horizon_h", "threshold_km", "step_s"):
        if not getattr(args, name) > 0:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    if not 0.0 <= args.renew_fraction <= 1.0:
        p.error(f"--renew-fraction must be in [0, 1], got {args.renew_fraction}")
    if not 0.0 < args.advance_s < args.horizon_h * 3600.0:
        p.error(f"--advance-s must be positive and shorter than the horizon, got {args.advance_s}")
    try:
        args.start_dt = parse_iso(args.start)
    except ValueError:
        p.error(f"--start {args.start!r}: expected an ISO-8601 instant such as 2025-10-04T00:00:00Z")
    return args


@dataclasses.dataclass
class Reference:
    """The reference catalogue as the job screens it, and the horizon's grid."""

    entries: list  # sda.orbit.catalog entries, the newest per object
    catalogue: Any  # sda.orbit.screening.CatalogueLines
    satrecs: list
    start: float
    end: float
    times: Any  # the grid times (numpy array)


@dataclasses.dataclass
class SparkRuns:
    """What the Spark session measured: its start, the full screenings (the last one's events, metrics
    and SGP4 errors) and the incremental runs after it."""

    spark_start_s: float
    runs: list[float]
    events: Any  # pandas DataFrame of the full screening's open events
    metrics: dict
    errors: list
    renewed: dict
    increments: list[float]
    inc_metrics: dict
    inc_events: Any


def setup(args) -> Reference:
    """Load the reference catalogue and lay out the horizon's grid."""
    from sda.orbit import screening

    entries = load_reference_catalogue()
    catalogue = screening.CatalogueLines(tuple(e.norad_id for e in entries), tuple(e.line1 for e in entries),
                                         tuple(e.line2 for e in entries))
    satrecs = [e.satrec for e in entries]
    start = args.start_dt.timestamp()
    end = start + args.horizon_h * 3600.0
    times = screening.time_grid(start, end, args.step_s)
    log(f"{len(entries)} objects, {len(times)} grid steps of {args.step_s:g} s, threshold {args.threshold_km:g} km")
    return Reference(entries, catalogue, satrecs, start, end, times)


def measure_floor(ref: Reference, args) -> list[float]:
    """``floor_s``, ``--repeat`` times."""
    floors = []
    for k in range(args.repeat):
        floors.append(floor_seconds(ref.satrecs, ref.times))
        log(f"floor (SatrecArray, {len(ref.entries)} x {len(ref.times)}): {floors[-1]:.2f} s")
    return floors


def full_screenings(spark, settings, ref: Reference, args) -> tuple[list[float], Any, dict, list]:
    """``screen_s``, ``--repeat`` times: (the run times, the last run's events, metrics and SGP4 errors)."""
    from jobs.conjunction import screen

    runs = []
    for k in range(args.repeat):
        shutil.rmtree(settings.ephemeris_cache, ignore_errors=True)  # each run stores the states it propagates
        t0 = time.perf_counter()
        events, metrics, errors = screen(spark, ref.catalogue, ref.start, ref.end, args.threshold_km, args.step_s,
                                         settings.shuffle_partitions, str(settings.ephemeris_cache))
        runs.append(time.perf_counter() - t0)
        log(f"screen (Spark): {runs[-1]:.2f} s, {len(events)} events, {metrics}")
    return runs, events, metrics, errors


def incremental_runs(spark, settings, ref: Reference, events, args) -> tuple[dict, list[float], dict, Any]:
    """``incremental_run_s``, ``--repeat`` times, on the full screening recorded as the screening state:
    (the renewed catalogue, the run times, the last run's metrics and open events)."""
    from jobs.conjunction import screen_increment
    from sda.orbit import screening

    renewed, increments, inc_metrics = renewed_catalogue(ref.entries, ref.start, args), [], {}
    previous = screening.ScreeningState(ref.start, ref.end, args.threshold_km, args.step_s, screening.code_version(),
                                        {e.norad_id: e.epoch.timestamp() for e in ref.entries}, events)
    new_start, new_end = ref.start + args.advance_s, ref.end + args.advance_s
    for k in range(args.repeat):
        t0 = time.perf_counter()
        plan = screening.plan_increment(previous, renewed["epochs"], new_start, new_end, args.threshold_km,
                                        args.step_s, screening.code_version())
        inc_events, _, inc_metrics, _ = screen_increment(spark, renewed["catalogue"], plan, new_start, new_end,
                                                         args.threshold_km, args.step_s, settings.shuffle_partitions,
                                                         str(settings.ephemeris_cache))
        increments.append(time.perf_counter() - t0)
        log(f"incremental run (Spark, {args.advance_s:g} s later, {len(plan.changed)} element sets renewed): "
            f"{increments[-1]:.2f} s, {len(inc_events)} open events, {inc_metrics}")
    return renewed, increments, inc_metrics, inc_events


def spark_runs(ref: Reference, args) -> SparkRuns:
    """The full screenings, then the incremental runs, in one Spark Connect session."""
    from sda.config.settings import load_settings
    from sda.lake import server

    # the server's address from the environment (SDA_CONNECT_PORT ...), so a benchmark can run beside a
    # pipeline; an ephemeris cache of its own (the server runs on this machine), removed at the end
    cache = Path(tempfile.mkdtemp(prefix="sda-bench-ephemeris-"))
    settings = load_settings(shuffle_partitions=4, driver_memory="4g", ephemeris_cache=cache)
    t0 = time.perf_counter()
    with server.running(settings) as spark:  # the pipeline's Spark Connect server (started if none answers)
        spark_start_s = time.perf_counter() - t0
        log(f"Spark Connect session ({settings.spark_master}, {settings.connect_url}): {spark_start_s:.1f} s")
        runs, events, metrics, errors = full_screenings(spark, settings, ref, args)
        renewed, increments, inc_metrics, inc_events = incremental_runs(spark, settings, ref, events, args)
    inc_metrics["ephemeris_cache_mb"] = round(sum(f.stat().st_size for f in cache.rglob("*.npy")) / 2**20, 1)
    shutil.rmtree(cache, ignore_errors=True)
    return SparkRuns(spark_start_s, runs, events, metrics, errors, renewed, increments, inc_metrics, inc_events)


def local_screening(ref: Reference, args) -> dict:
    """``screen_cpu_s`` of the in-process chain with ``--local`` (else nothing)."""
    from sda.orbit import screening

    if not args.local:
        return {}
    t0, c0 = time.perf_counter(), time.process_time()
    local_events, local_metrics = screening.screen(list(ref.catalogue.norad_ids), ref.satrecs, ref.start, ref.end,
                                                   args.threshold_km, args.step_s)
    local = {"screen_local_s": round(time.perf_counter() - t0, 2), "screen_cpu_s": round(time.process_time() - c0, 2),
             "events_local": len(local_events)}
    log(f"screen (one process): {local}")
    return local


def report(ref: Reference, floors: list[float], spark: SparkRuns, local: dict, args) -> dict:
    """The figures of the run, as the final JSON line and ``--out`` give them."""
    from sda.orbit import screening

    events, metrics, increments = spark.events, spark.metrics, spark.increments
    screen_s, floor_s = min(spark.runs), min(floors)
    persistent = int(events["flag"].map(screening.is_persistent).sum()) if len(events) else 0
    closest = events.nsmallest(5, "miss_km")[["primary_id", "secondary_id", "tca_unix", "miss_km", "rel_speed_km_s"]]
    inc_metrics = spark.inc_metrics
    return {
        "objects": len(ref.entries),
        "events": len(events),
        "persistent": persistent,
        "pairs_after_each_filter": {
            "all": metrics["pairs_all"],
            "altitude_bands": metrics["pairs_altitude"],
            "grid_pair_steps": metrics["pair_steps_grid"],
            "linear_pair_steps": metrics["pair_steps_linear"],
            "linear_pairs": metrics["pairs_linear"],
            "events": len(events),
        },
        "screen_s": round(screen_s, 2),
        "floor_s": round(floor_s, 2),
        "ratio_to_floor": round(screen_s / floor_s, 2),
        "target_ratio": 2.0,
        "renew_fraction": args.renew_fraction,
        "incremental_run_s": round(min(increments), 2),
        "incremental_ratio": round(min(increments) / screen_s, 3),
        "incremental_target_ratio": 0.10,
        "incremental_runs_s": [round(x, 2) for x in increments],
        "incremental": {"advance_s": args.advance_s, "renewed": spark.renewed["count"],
                        "events_kept": inc_metrics.get("events_kept"),
                        "events_dropped_tca_passed": inc_metrics.get("events_dropped_tca_passed"),
                        "pairs_rechecked": inc_metrics.get("pairs_rechecked"), "parts": inc_metrics.get("parts"),
                        "pairs_linear": inc_metrics.get("pairs_linear"), "open_events": len(spark.inc_events),
                        "ephemeris_states_read": inc_metrics.get("ephemeris_states_read"),
                        "ephemeris_cache_mb": inc_metrics.get("ephemeris_cache_mb")},
        "screen_runs_s": [round(x, 2) for x in spark.runs],
        "floor_runs_s": [round(x, 2) for x in floors],
        "spark_start_s": round(spark.spark_start_s, 1),
        "cores": os.cpu_count(),
        "floor_cores": 1,
        "steps": len(ref.times),
        "step_s": args.step_s,
        "cell_km": metrics["cell_km"],
        "horizon_h": args.horizon_h,
        "threshold_km": args.threshold_km,
        "start": args.start_dt.isoformat(),
        "sgp4_errors": len(spark.errors),
        "closest": closest.round(4).to_dict(orient="records"),
        **local,
        "cpu_count": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def main(argv=None) -> dict:
    args = parse_args(argv)
    ref = setup(args)
    floors = measure_floor(ref, args)
    spark = spark_runs(ref, args)
    local = local_screening(ref, args)
    result = report(ref, floors, spark, local, args)
    write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
