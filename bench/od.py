"""Orbit determination against the simulator's truth: fused orbits versus the catalogue they started from.

    .venv/bin/python bench/od.py [--objects 300] [--hours 6] [--fits 40] [--others 10] [--seed 1]
                                 [--work DIR] [--out FILE]

1. The simulator writes ``--hours`` of radar, optical and ISL files over a generated catalogue of
   ``--objects`` objects whose element sets are 0.5-3 days old (the catalogue is the prior). Its truth is
   numerical (sda.sim.dynamics: EGM2008 20x20, NRLMSISE-00, each body's own Cd, Cr and area-to-mass);
   the estimator's model is another (sda.orbit.estimation.dynamics).
2. Each object's observations are those that reach correlation (sda.sim.scoring.landed_observations),
   associated by the truth's labels (correlation is another stage's business). LEO objects observed in
   at least two passes (observations more than 20 minutes apart start a new pass; an ISL track longer
   than a revolution, 90 minutes, counts as two) are fitted, at most ``--fits`` of them (chosen at
   random with ``--seed``), and up to ``--others`` MEO/GEO/HEO objects.
3. Each fit (sda.orbit.estimation.estimator.fit, prior: the element set at the first observation with the
   catalogue's modelled covariance) is reported at the run's end and predicted 24 h further
   (sda.orbit.estimation.predict). Scored against the truth, per regime: position error of the fused orbit and
   of the catalogue element set (median, p90; m), their ratio, and the Mahalanobis distance d^2 of the
   fused error under its covariance (position block: mean, median, share inside the 95 % ellipsoid
   d^2 <= 7.815), fit time per object (s), weighted residual RMS, iterations and status.

Prints a line per object and, last, one JSON line; the same JSON goes to ``--out`` (default
``bench/results/od.json``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from pathlib import Path

import numpy as np
from common import CHI2_3_95, RESULTS, WORK, add_dedup_flag, dedup_of, log, write_result

PASS_GAP_S = 1200.0
REVOLUTION_S = 5400.0
LEADS_H = (0.0, 24.0)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=300)
    p.add_argument("--hours", type=float, default=6.0)
    p.add_argument("--fits", type=int, default=40, help="LEO objects fitted (default 40)")
    p.add_argument("--others", type=int, default=10, help="MEO/GEO/HEO objects fitted (default 10)")
    p.add_argument("--seed", type=int, default=1)
    add_dedup_flag(p)
    p.add_argument("--start", default="2026-11-21T06:00:00Z")
    p.add_argument("--work", type=Path, default=WORK.parent / "bench_od")
    p.add_argument("--out", type=Path, default=RESULTS / "od.json")
    return p


def simulate(args):
    from sda.sim.common import parse_time
    from sda.sim.simulate import SimConfig
    from sda.sim.simulate import simulate as run

    start = parse_time(args.start)
    cfg = SimConfig(start=start, end=start + dt.timedelta(hours=args.hours), landing=args.work / "landing",
                    catalog_out=args.work / "catalog.tle", objects=args.objects, seed=args.seed,
                    tle_age_days=(0.5, 3.0))
    t = time.perf_counter()
    result = run(cfg)
    log(f"simulated {args.hours:g} h of {args.objects} objects in {time.perf_counter() - t:.0f} s")
    return cfg, result


def passes(t: np.ndarray) -> int:
    t = np.sort(t)
    return 0 if len(t) == 0 else 1 + int(np.sum(np.diff(t) > PASS_GAP_S))


def choose(obs, ids, sats, args) -> list[tuple[int, str]]:
    """(norad, regime) of the objects to fit: LEO with >= 2 passes (at most --fits), then others."""
    from sda.orbit.frames import perigee_apogee_km
    from sda.orbit.uncertainty import orbit_regime

    rng = np.random.default_rng(args.seed)
    by_id = dict(zip(ids, sats))
    t = obs["event_time"].astype("int64").to_numpy() / 1e9
    leo, other = [], []
    for norad, rows in obs.groupby("true_id").indices.items():
        if int(norad) not in by_id:
            continue
        regime = orbit_regime(*perigee_apogee_km(by_id[int(norad)]))
        span = float(np.ptp(t[rows])) if len(rows) else 0.0
        if regime == "LEO" and (passes(t[rows]) >= 2 or span >= REVOLUTION_S):
            leo.append((int(norad), regime))
        elif regime != "LEO" and len(rows) >= 6:
            other.append((int(norad), regime))
    pick = lambda items, n: [items[i] for i in sorted(rng.permutation(len(items))[:n])]  # noqa: E731
    return pick(leo, args.fits) + pick(other, args.others)


def score_one(norad: int, regime: str, rows, sat, eph, t_end: float, sigmas) -> dict:
    """Fit one object, predict it, and score fused and catalogue positions against the truth."""
    from sda.orbit.estimation import fit, predict, prior_from_tle
    from sda.orbit.frames import propagate

    t_obs = rows["event_time"].astype("int64").to_numpy() / 1e9
    prior = prior_from_tle(sat, float(t_obs.min()))
    clock = time.perf_counter()
    result = fit(rows, prior, sigmas, epoch=t_end)
    fit_s = time.perf_counter() - clock
    times = np.array([t_end + h * 3600.0 for h in LEADS_H])
    row = {"norad": norad, "regime": regime, "fit_s": fit_s, "status": result.status, "rms": result.rms,
           "iterations": result.iterations, "outliers": result.outliers, "b": result.b, "sigma_b": result.sigma_b,
           "observations": result.observations, "passes": passes(t_obs)}
    _, r_true, _ = eph.at(times)
    r_true = r_true[eph.rows([norad])[0]]
    _, r_cat, _ = propagate([sat], times)
    row["catalogue_m"] = (np.linalg.norm(r_cat[0] - r_true, axis=1) * 1000.0).tolist()
    if not np.isfinite(result.state).all():
        return row
    clock = time.perf_counter()
    pred = predict(result, times)
    row["predict_s"] = time.perf_counter() - clock
    err = (pred.r_km - r_true) * 1000.0
    row["fused_m"] = np.linalg.norm(err, axis=1).tolist()
    row["d2"] = [float(e @ np.linalg.solve(c[:3, :3], e)) for e, c in zip(err, pred.covariance)]
    row["sigma_m"] = [float(np.sqrt(np.trace(c[:3, :3]))) for c in pred.covariance]
    return row


def summarise(rows: list[dict]) -> dict:
    """Per regime: medians and p90 of the errors, ratios, d^2 statistics, fit times, statuses."""
    out = {}
    for regime in sorted({r["regime"] for r in rows}):
        group = [r for r in rows if r["regime"] == regime]
        fused = [r for r in group if "fused_m" in r]
        entry = {"objects": len(group), "status": {s: sum(r["status"] == s for r in group)
                                                   for s in sorted({r["status"] for r in group})}}
        fit_s = np.array([r["fit_s"] for r in group])
        entry["fit_s"] = {"median": float(np.median(fit_s)), "p90": float(np.percentile(fit_s, 90)),
                          "mean": float(fit_s.mean())}
        entry["rms_median"] = float(np.nanmedian([r["rms"] for r in group]))
        for k, lead in enumerate(LEADS_H):
            cat = np.array([r["catalogue_m"][k] for r in fused])
            fus = np.array([r["fused_m"][k] for r in fused])
            d2 = np.array([r["d2"][k] for r in fused])
            entry[f"+{lead:g}h"] = {
                "catalogue_m": {"median": float(np.median(cat)), "p90": float(np.percentile(cat, 90))},
                "fused_m": {"median": float(np.median(fus)), "p90": float(np.percentile(fus, 90))},
                "ratio_of_medians": float(np.median(fus) / np.median(cat)),
                "d2": {"mean": float(d2.mean()), "median": float(np.median(d2)),
                       "inside_95": float(np.mean(d2 <= CHI2_3_95))},
            }
        out[regime] = entry
    return out


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    from sda.orbit.estimation import registry_sigmas
    from sda.orbit.sensors import load_sensors
    from sda.sim import scoring
    from sda.sim.truth import load_ephemeris

    cfg, result = simulate(args)
    sensors = load_sensors()
    obs = scoring.landed_observations(result, sensors, dedup=dedup_of(args))
    obs = obs[obs["true_id"].notna()].reset_index(drop=True)
    ids, sats = scoring.catalogue(result.catalog_file)
    t_end = cfg.end.timestamp()
    eph = load_ephemeris(result.summary_file, until_unix=t_end + max(LEADS_H) * 3600.0 + 600.0)
    # a manoeuvring body is not what a ballistic fit is for (the truth knows its burns, if it has any)
    burned = {int(eph.norad[b[0]]) for b in getattr(eph, "burns", [])}
    obs = obs[~obs["true_id"].isin(burned)].reset_index(drop=True)
    chosen = choose(obs, ids, sats, args)
    by_id, groups, sigmas = dict(zip(ids, sats)), obs.groupby("true_id").indices, registry_sigmas(sensors)
    rows = []
    for norad, regime in chosen:
        row = score_one(norad, regime, obs.iloc[groups[norad]], by_id[norad], eph, t_end, sigmas)
        rows.append(row)
        log(json.dumps({k: (np.round(v, 1).tolist() if isinstance(v, list) else v) for k, v in row.items()}))
    figures = {"bench": "od", "objects": args.objects, "hours": args.hours, "seed": args.seed, "dedup": dedup_of(args),
               "fitted": len(rows), "manoeuvring_excluded": len(burned), "regimes": summarise(rows)}
    write_result(args.out, {**figures, "per_object": rows}, figures, indent=1, default=float)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
