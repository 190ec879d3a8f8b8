"""Every prediction the pipeline makes, scored against a truth its models do not share.

    .venv/bin/python bench/accuracy.py [--objects 1000] [--hours 6] [--ages 0.5:3] [--start ISO] [--seed 1]
                                       [--work DIR] [--out FILE]

1. The simulator writes ``--hours`` of radar, optical and ISL files over a generated catalogue of
   ``--objects`` objects whose element sets are 0.5-3 days old (``--ages``), with the injected
   conjunction three hours after the run. The sensors observe numerical trajectories (sda.sim.dynamics:
   EGM2008 20x20, NRLMSISE-00 drag, Sun and Moon, SRP, each body with its own Cd, Cr and area-to-mass);
   the pipeline predicts with SGP4.
2. The stages run as the DAG runs them (catalog, ingest, normalize, dedup, correlate, conjunction) on a
   Spark Connect server; the screening starts at the run's end and covers the setting's horizon.
3. The truth is extended with the same force model to the end of the horizon and everything is scored,
   per orbit regime of the catalogue's element set:

   * ``position``: the error of the orbit the pipeline screens with (the newest element set per object
     in gold ``catalog``) at the run's end and 6 h and 24 h later, radial / along-track / cross-track /
     total, median and p90 (m);
   * ``covariance``: the Mahalanobis distance of each true position error under the covariance the
     pipeline publishes for that object at that time (sda.orbit.uncertainty, with the object's newest
     gold ``object_state`` as the alerts use it): mean and median d^2 (3 for a realistic covariance) and
     the share inside the 95 % ellipsoid (0.95 for a realistic one);
   * ``conjunctions`` / ``alerts``: for every screened event and open alert, predicted against true miss
     distance and TCA (the truth's closest approach of the pair within 10 minutes of the predicted TCA);
     alerts whose true miss is over 5 km;
   * ``recall``: of the true approaches between catalogued objects in the horizon (brute force over the
     truth), the share under 1 km and under the screening threshold that the screening found (an event of
     the same pair within 2 minutes of the true TCA).

What the figures leave out: the truth's force model is brahe's, so a model error the simulator does
not have (e.g. unmodelled attitude-dependent drag) is in neither; sensor biases and light time are not
simulated; the pipeline's covariance is a model of element-set ageing (no orbit determination yet).

Prints figures as it goes and, last, one JSON line; the same JSON goes to ``--out``
(default ``bench/results/accuracy.json``). Takes 10-20 minutes on 2 cores at the defaults.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd  # noqa: F401  (module level: pandas_udf resolves its type hints here)

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_ROOT))
from bench.accuracy_fused import score_fused  # noqa: E402

STAGES = ("catalog", "ingest", "normalize", "dedup", "correlate", "fuse", "conjunction")
LEADS_H = (0.0, 6.0, 24.0)
FAR_START, FAR_END = "2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z"


def log(msg: str) -> None:
    print(f"[{dt.datetime.now():%H:%M:%S}] {msg}", flush=True)


def parser() -> argparse.ArgumentParser:
    from sda.sim.common import parse_time
    from sda.sim.simulate import number_in, positive_int
    from sda.sim.tle_error import parse_age

    def age(text: str):
        try:
            return parse_age(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--objects", type=positive_int, default=1000, help="generated catalogue size (default 1000)")
    p.add_argument("--hours", type=number_in(0.25, 48.0, "hours"), default=6.0, help="simulated hours (default 6)")
    p.add_argument("--ages", type=age, default=(0.5, 3.0), help="element-set ages, days, LO:HI (default 0.5:3)")
    p.add_argument("--start", type=parse_time, default=parse_time("2026-11-21T00:00:00Z"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--work", type=Path, default=PROJECT_ROOT / "var" / "bench" / "accuracy")
    p.add_argument("--fused-sample", type=int, default=150,
                   help="fused objects scored per regime (each needs a numerical prediction with covariance)")
    p.add_argument("--out", type=Path, default=PROJECT_ROOT / "bench" / "results" / "accuracy.json")
    return p


def run_stages(spark, settings, end: dt.datetime) -> dict:
    import importlib

    screen = end.isoformat().replace("+00:00", "Z")
    seconds = {}
    for stage in STAGES:
        extra = ["--screen-start", screen] if stage == "conjunction" else []
        started = time.monotonic()
        importlib.import_module(f"jobs.{stage}").main(
            ["--start", FAR_START, "--end", FAR_END, "--run-id", f"accuracy_{stage}", *extra],
            settings=settings, spark=spark)
        seconds[stage] = round(time.monotonic() - started, 1)
        log(f"{stage}: {seconds[stage]} s")
    return seconds


def read_tables(spark, settings) -> dict:
    from sda.lake.tables import TABLES

    out = {name: TABLES[name].read(spark, settings).toPandas()
           for name in ("catalog", "object_state", "conjunctions", "alerts", "fused_orbits")}
    out["observed_times"] = (TABLES["correlated"].read(spark, settings).select("norad_id", "event_time")
                             .toPandas())
    out["catalog"] = out["catalog"].sort_values("epoch").groupby("norad_id").tail(1)
    out["object_state"] = out["object_state"].sort_values("last_observed").groupby("norad_id").tail(1)
    return out


def score_positions(eph, tables: dict, end_unix: float, min_sigma_m: float) -> dict:
    """Position error and covariance realism per regime and lead time (module docstring)."""
    from sgp4.api import Satrec

    from sda.orbit import frames, uncertainty
    from sda.sim import accuracy

    cat = tables["catalog"].set_index("norad_id")
    states = tables["object_state"].set_index("norad_id")
    ids = [int(n) for n in eph.norad if int(n) in cat.index]
    sats = [Satrec.twoline2rv(cat.at[n, "line1"], cat.at[n, "line2"]) for n in ids]
    regimes = np.array([accuracy.regime_of(s) for s in sats])
    refs = []
    for n in ids:
        last = states.at[n, "last_observed"] if n in states.index else None
        rms = states.at[n, "residual_rms_m"] if n in states.index else None
        refs.append(uncertainty.choose_reference(
            pd.Timestamp(cat.at[n, "epoch"]).tz_localize("UTC").to_pydatetime(), cat.at[n, "perigee_km"],
            cat.at[n, "apogee_km"], None if last is None or pd.isna(last) else
            pd.Timestamp(last).tz_localize("UTC").to_pydatetime(),
            None if rms is None or pd.isna(rms) else float(rms), min_sigma_m))
    rows = eph.rows(ids)
    out: dict = {}
    for lead in LEADS_H:
        t = end_unix + lead * 3600.0
        _, r_true, _ = eph.at([t])
        _, r_pred, v_pred = frames.propagate(sats, np.array([t]))
        sig = np.array([uncertainty.sigma_rtn_m(ref, t) for ref in refs])
        errors = accuracy.position_errors(r_true[rows, 0], r_pred[:, 0], v_pred[:, 0], sig)
        errors["regime"] = regimes
        errors = errors[np.isfinite(errors["total_m"])]
        out[f"{lead:g}h"] = {regime: {"objects": int(len(g)), **accuracy.error_figures(g)}
                             for regime, g in errors.groupby("regime")}
    return out


def pairs_alerted(true: pd.DataFrame, alerts: pd.DataFrame) -> dict:
    """Pairs with a true approach under 1 km, and of them those with an open alert: a slow encounter has
    several true minima minutes apart and one alert, which a match by TCA within 120 s would count as missed."""
    close = {(min(p, s), max(p, s)) for p, s in zip(true[true["miss_m"] < 1000.0]["primary_id"],
                                                     true[true["miss_m"] < 1000.0]["secondary_id"])}
    alerted = {(min(p, s), max(p, s)) for p, s in zip(alerts["primary_id"], alerts["secondary_id"])}
    return {"pairs": len(close), "pairs_alerted": len(close & alerted),
            "pairs_not_alerted": sorted([list(map(int, x)) for x in close - alerted])}


def fused_ids(tables: dict) -> set[int]:
    f = tables["fused_orbits"]
    return set(int(n) for n in f[(f["status"] == "converged") & f["line1"].notna()]["norad_id"])


def score_events(eph, tables: dict, horizon: tuple[float, float], threshold_km: float) -> dict:
    """Predicted against true conjunctions and alerts, and the recall of the true approaches."""
    from sda.sim import accuracy

    def judged(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        truth = [accuracy.true_closest(eph, p, s, pd.Timestamp(t).tz_localize("UTC").timestamp())
                 for p, s, t in zip(frame["primary_id"], frame["secondary_id"], frame["tca"])]
        frame["true_tca_unix"] = [t for t, _ in truth]
        frame["true_miss_m"] = [m for _, m in truth]
        frame["tca_unix"] = [pd.Timestamp(t).tz_localize("UTC").timestamp() for t in frame["tca"]]
        frame["miss_error_m"] = (frame["miss_m"] - frame["true_miss_m"]).abs()
        frame["tca_error_s"] = (frame["tca_unix"] - frame["true_tca_unix"]).abs()
        return frame

    conj = judged(tables["conjunctions"])
    alerts = judged(tables["alerts"][tables["alerts"]["status"] != "closed"])
    cat_ids = set(int(n) for n in tables["catalog"]["norad_id"])
    rows = np.array([i for i, n in enumerate(eph.norad) if int(n) in cat_ids])
    started = time.monotonic()
    true = accuracy.true_approaches(eph, horizon[0], horizon[1], threshold_km, rows=rows)
    log(f"true approaches under {threshold_km:g} km in the horizon: {len(true)} ({time.monotonic() - started:.0f} s)")
    found = []
    for p, s, t in zip(true["primary_id"], true["secondary_id"], true["tca_unix"]):
        same = conj[(conj["primary_id"] == min(p, s)) & (conj["secondary_id"] == max(p, s))]
        found.append(bool(((same["tca_unix"] - t).abs() <= 120.0).any()))
    true["found"] = found

    def recall(limit_m: float) -> dict:
        sub = true[true["miss_m"] < limit_m]
        return {"true": int(len(sub)), "found": int(sub["found"].sum()),
                "recall": None if sub.empty else round(float(sub["found"].mean()), 4)}

    def figures(frame: pd.DataFrame) -> dict:
        return {"count": int(len(frame)), "miss_error_m": accuracy.summary(frame["miss_error_m"]),
                "tca_error_s": accuracy.summary(frame["tca_error_s"]),
                "true_miss_over_5km": int((frame["true_miss_m"] > 5000.0).sum()),
                "truly_under_1km": int((frame["true_miss_m"] < 1000.0).sum())}

    missed = true[~true["found"] & (true["miss_m"] < 1000.0)]
    fused = fused_ids(tables)
    both = alerts["p_cov_source"].str.startswith("fused/") & alerts["s_cov_source"].str.startswith("fused/")
    true_fused = true[true["primary_id"].isin(fused) & true["secondary_id"].isin(fused)]
    fused_missed = true_fused[~true_fused["found"] & (true_fused["miss_m"] < 1000.0)]
    return {"conjunctions": figures(conj), "alerts": figures(alerts), "alerts_both_fused": figures(alerts[both]),
            "alerts_one_fused": figures(alerts[both ^ (alerts["p_cov_source"].str.startswith("fused/")
                                                       | alerts["s_cov_source"].str.startswith("fused/"))]),
            "alerts_catalogue_only": figures(alerts[~(alerts["p_cov_source"].str.startswith("fused/")
                                                      | alerts["s_cov_source"].str.startswith("fused/"))]),
            "recall_under_1km_both_fused": {"true": int((true_fused["miss_m"] < 1000.0).sum()),
                                            "found": int(true_fused[true_fused["miss_m"] < 1000.0]["found"].sum()),
                                            **pairs_alerted(true_fused, alerts),
                                            "missed": fused_missed.head(20).round(1).to_dict("records")},
            "recall_under_1km": recall(1000.0), "recall_under_threshold": recall(threshold_km * 1000.0),
            "missed_under_1km": missed.head(20).round(1).to_dict("records"),
            "alerts_detail": alerts[["primary_id", "secondary_id", "level", "miss_m", "true_miss_m", "tca_error_s"]]
            .round(1).head(40).to_dict("records")}


def main(argv=None) -> dict:
    args = parser().parse_args(argv)
    from sda.config.settings import load_settings
    from sda.lake import server
    from sda.lake.spark import connect
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
    own_server = server.start(settings).get("started", False)
    spark = connect(settings)
    try:
        stage_s = run_stages(spark, settings, end)
        tables = read_tables(spark, settings)
    finally:
        spark.stop()
        if own_server:
            server.stop(settings)
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
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(json.dumps(result, default=str), flush=True)
    return result


if __name__ == "__main__":
    main()
