"""Every prediction the pipeline makes, scored against a truth its models do not share.

    .venv/bin/python bench/accuracy.py [--objects 1000] [--hours 6] [--ages 0.5:3] [--start ISO] [--seed 1]
                                       [--work DIR] [--out FILE]

1. The simulator writes ``--hours`` of radar, optical and ISL files over a generated catalogue of
   ``--objects`` objects whose element sets are 0.5-3 days old (``--ages``), with the injected
   conjunction three hours after the run. The sensors observe numerical trajectories (sda.sim.dynamics:
   EGM2008 20x20, NRLMSISE-00 drag, Sun and Moon, SRP, each body with its own Cd, Cr and area-to-mass);
   the pipeline predicts with SGP4.
2. The stages run as the DAG runs them (every stage of sda.pipeline.topology, in DAG order) on a Spark
   Connect server; the screening starts at the run's end and covers the setting's horizon
   (bench/accuracy_run.py).
3. The truth is extended with the same force model to the end of the horizon and everything is scored,
   per orbit regime of the catalogue's element set:

   * ``position`` (bench/accuracy_positions.py): the error of the orbit the pipeline screens with (the
     newest element set per object in gold ``catalog``) at the run's end and 6 h and 24 h later, radial /
     along-track / cross-track / total, median and p90 (m), and the Mahalanobis distance of each true position
     error under the covariance the pipeline publishes for that object at that time (sda.orbit.uncertainty,
     with the object's newest gold ``object_state`` as the alerts use it): mean and median d^2 (3 for a
     realistic covariance) and the share inside the 95 % ellipsoid (0.95 for a realistic one);
   * ``fused`` (the same module): the fused orbits beside the catalogue element sets they started from, at
     the run's end and a day later;
   * ``conjunctions`` / ``alerts`` (bench/accuracy_events.py): for every screened event and open alert,
     predicted against true miss distance and TCA (the truth's closest approach of the pair within 10
     minutes of the predicted TCA); alerts whose true miss is over 5 km;
   * ``recall``: of the true approaches between catalogued objects in the horizon (brute force over the
     truth), the share under 1 km and under the screening threshold that the screening found (an event of
     the same pair within 2 minutes of the true TCA).

What the figures leave out: the truth's force model is brahe's, so a model error the simulator does
not have (e.g. unmodelled attitude-dependent drag) is in neither; sensor biases and light time are not
simulated.

Prints figures as it goes and, last, one JSON line; the same JSON goes to ``--out``
(default ``bench/results/accuracy.json``). Takes 10-20 minutes on 2 cores at the defaults.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import time
from pathlib import Path

import pandas as pd  # noqa: F401  (module level: pandas_udf resolves its type hints here)
from accuracy_events import score_events
from accuracy_positions import score_fused, score_positions
from accuracy_run import read_tables, run_stages
from common import RESULTS, WORK, age_range, log, write_result


def parser() -> argparse.ArgumentParser:
    from sda.sim.common import parse_time
    from sda.sim.simulate import number_in, positive_int

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--objects", type=positive_int, default=1000, help="generated catalogue size (default 1000)")
    p.add_argument("--hours", type=number_in(0.25, 48.0, "hours"), default=6.0, help="simulated hours (default 6)")
    p.add_argument("--ages", type=age_range, default=(0.5, 3.0), help="element-set ages, days, LO:HI (default 0.5:3)")
    p.add_argument("--start", type=parse_time, default=parse_time("2026-11-21T00:00:00Z"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--work", type=Path, default=WORK / "accuracy")
    p.add_argument("--fused-sample", type=int, default=150,
                   help="fused objects scored per regime (each needs a numerical prediction with covariance)")
    p.add_argument("--out", type=Path, default=RESULTS / "accuracy.json")
    return p


def main(argv=None) -> dict:
    args = parser().parse_args(argv)
    from sda.config.settings import load_settings
    from sda.lake import server
    from sda.sim.simulate import SimConfig, simulate
    from sda.sim.truth import load_ephemeris

    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    end = args.start + dt.timedelta(hours=args.hours)
    started = time.monotonic()
    sim = simulate(SimConfig(start=args.start, end=end, landing=args.work / "landing", objects=args.objects,
                             catalog_out=args.work / "catalog.tle", tle_age_days=args.ages, seed=args.seed,
                             inject_conjunction=True, tca=end + dt.timedelta(hours=3)))
    sim_s = round(time.monotonic() - started, 1)
    log(f"simulated {args.hours:g} h of {args.objects} objects in {sim_s} s ({sim.sim_id})")
    settings = load_settings(env={}, lakehouse=args.work / "lakehouse", landing=args.work / "landing",
                             outbox=args.work / "outbox", catalog_file=sim.catalog_file, shuffle_partitions=4,
                             driver_memory="8g")
    with server.running(settings) as spark:  # the settings' server (started for the run if none answers)
        stage_s = run_stages(spark, settings, end)
        tables = read_tables(spark, settings)
    horizon = (end.timestamp(), end.timestamp() + settings.screening_horizon_h * 3600.0)
    started = time.monotonic()
    eph = load_ephemeris(sim.summary_file, until_unix=horizon[1] + 900.0)
    log(f"truth extended to the horizon's end in {time.monotonic() - started:.0f} s")
    result = {
        "objects": args.objects, "hours": args.hours, "ages_days": list(args.ages), "seed": args.seed,
        "start": args.start.isoformat(), "truth_model": json.loads(sim.summary_file.read_text())["truth"]["model"],
        "screens_with": "fused orbits where converged (sda.orbit.estimation), else catalogue element sets "
                        "(SGP4) with the modelled covariance",
        "position": score_positions(eph, tables, end.timestamp(), settings.uncertainty_min_sigma_m),
        "fused": score_fused(eph, tables, end.timestamp(), args.fused_sample, args.seed),
        **score_events(eph, tables, horizon, settings.screening_threshold_km),
        "injected": json.loads(sim.summary_file.read_text())["injected"],
        "simulate_s": sim_s, "stage_s": stage_s,
    }
    write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
