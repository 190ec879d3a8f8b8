"""bench/accuracy.py's run: its work directory, the simulation, the stages as the DAG runs them over the
simulated files, the tables it scores and the truth extended to the horizon.

Every stage of :mod:`sda.pipeline.topology` runs once, in DAG order, over all of event time (one incremental
batch), with the topology's own arguments (catalog's ``--file``) and the screening starting at the run's end.

The work directory keeps what a later run may reuse: ``simulation.json`` (the simulation's arguments and
files), ``truth_to_<unix>.npz`` (the truth extended to that time) and ``stages.json`` (the stages' seconds, with
the lakehouse and outbox they wrote). :func:`prepare_work` reuses a simulation only when its arguments are the
run's.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from pathlib import Path

from common import iso_z, log, run_stage, stage_argv

from sda.pipeline.topology import stage_names

SCORED_TABLES = ("catalog", "object_state", "conjunctions", "alerts", "fused_orbits")
SIMULATION = "simulation.json"
STAGES = "stages.json"
RUN_OUTPUT = ("lakehouse", "outbox", "ephemeris", STAGES)  # what the stages write: gone before they run again


def simulation_args(args) -> dict:
    """The arguments that make a simulation (what a reused one must share)."""
    return {"sky": args.sky, "seed": args.seed, "objects": args.objects, "hours": args.hours,
            "ages_days": list(args.ages), "start": args.start.isoformat()}


def _reusable(work: Path, wanted: dict) -> dict | None:
    path = work / SIMULATION
    if not path.is_file():
        return None
    sim = json.loads(path.read_text())
    return sim if sim.get("args") == wanted and Path(sim["summary_file"]).is_file() else None


def prepare_work(args, end: dt.datetime) -> dict:
    """The simulation of the run in ``args.work`` (``summary_file``, ``catalog_file``, ``simulate_s``,
    ``reused``): the one there when ``--reuse-sim`` / ``--rescore`` and it was made with the same arguments
    (``--rescore`` also needs the stages' output), else a new one in an emptied directory."""
    from sda.sim.simulate import SimConfig, simulate

    wanted = simulation_args(args)
    sim = _reusable(args.work, wanted) if (args.reuse_sim or args.rescore) else None
    if args.rescore and (sim is None or not (args.work / STAGES).is_file()):
        raise SystemExit(f"--rescore: {args.work} holds no run of these arguments ({SIMULATION}, {STAGES})")
    if sim is not None:
        if args.reuse_sim:
            for path in (args.work / name for name in RUN_OUTPUT):
                shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
        log(f"reusing the simulation in {args.work} ({sim['sim_id']})")
        return {**sim, "reused": True}
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    started = time.monotonic()
    made = simulate(SimConfig(start=args.start, end=end, landing=args.work / "landing", objects=args.objects,
                              catalog_out=args.work / "catalog.tle", tle_age_days=args.ages, seed=args.seed,
                              inject_conjunction=True, tca=end + dt.timedelta(hours=3), sky=args.sky))
    sim = {"args": wanted, "sim_id": made.sim_id, "summary_file": str(made.summary_file),
           "catalog_file": str(made.catalog_file), "simulate_s": round(time.monotonic() - started, 1)}
    (args.work / SIMULATION).write_text(json.dumps(sim, indent=2) + "\n")
    log(f"simulated {args.hours:g} h of {args.objects} objects under the {args.sky} sky in {sim['simulate_s']} s "
        f"({made.sim_id})")
    return {**sim, "reused": False}


def truth_to(work: Path, summary_file: Path, until_unix: float):
    """The simulation's truth extended to ``until_unix`` (sda.sim.truth.load_ephemeris), kept in ``work`` for a
    run that reuses the simulation."""
    from sda.sim.ephemeris import Ephemeris
    from sda.sim.truth import load_ephemeris

    cached = work / f"truth_to_{int(until_unix)}.npz"
    if cached.is_file():
        return Ephemeris.load(cached)
    started = time.monotonic()
    eph = load_ephemeris(summary_file, until_unix=until_unix)
    eph.save(cached)
    log(f"truth extended to the horizon's end in {time.monotonic() - started:.0f} s")
    return eph


def run_stages(spark, settings, end: dt.datetime, work: Path) -> dict:
    """Every stage, as the DAG runs them (no quality gate: they only validate): seconds per stage, also
    recorded in ``work`` (:data:`STAGES`)."""
    screen = iso_z(end)
    seconds = {}
    for stage in stage_names():
        extra = ["--screen-start", screen] if stage == "conjunction" else []
        started = time.monotonic()
        run_stage(spark, settings, stage, stage_argv(stage, settings, f"accuracy_{stage}", *extra))
        seconds[stage] = round(time.monotonic() - started, 1)
        log(f"{stage}: {seconds[stage]} s")
    (work / STAGES).write_text(json.dumps(seconds, indent=2) + "\n")
    return seconds


def recorded_stage_seconds(work: Path) -> dict:
    """The stages' seconds of the run whose tables ``work`` holds."""
    return json.loads((work / STAGES).read_text())


def read_tables(spark, settings) -> dict:
    """The scored tables as pandas: the newest element set and object state per object, the observation times."""
    from sda.lake.tables import TABLES

    out = {name: TABLES[name].read(spark, settings).toPandas() for name in SCORED_TABLES}
    from sda.lake.tables import table_exists

    out["sensor_calibrations"] = [] if not table_exists("sensor_calibrations", settings) else [
        r.asDict() for r in TABLES["sensor_calibrations"].read(spark, settings).selectExpr(
            "sensor_id", "quantity", "bias", "sigma", "n_obs", "n_objects",
            "unix_micros(window_start) / 1e6 AS window_start_unix", "unix_micros(window_end) / 1e6 AS window_end_unix")
        .collect()]
    out["observed_times"] = (TABLES["correlated"].read(spark, settings).select("norad_id", "event_time")
                             .toPandas())
    from sda.pipeline.space_weather import process_noise

    out["process_noise"] = process_noise(spark, settings)  # every landed interval, as the alerts' predictions take
    out["catalog"] = out["catalog"].sort_values("epoch").groupby("norad_id").tail(1)
    out["object_state"] = out["object_state"].sort_values("last_observed").groupby("norad_id").tail(1)
    return out
