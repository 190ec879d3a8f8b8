"""Correlation against a catalogue that is wrong the way real ones are: the real 13,407-object
catalogue (../shared/data/catalog, both files), its element sets ``age`` days old, observed on true
orbits that differ from them by the uncertainty model's errors (``sda.sim.simulate --tle-age-days``),
scored against the simulator's truth.

    .venv/bin/python bench/correlation.py [--ages 0.5,1,3,7] [--minutes 10] [--max-observations 30000]
                                          [--start 2025-10-05T00:00:00Z] [--seed 1] [--compare-fixed]
                                          [--fixed-sigma-m 2000] [--out FILE]
    .venv/bin/python bench/correlation.py --tracking [--objects 2000] [--fit-hours 6] [--workers 2] [--ages 1]
                                          [--work DIR] ...

``--tracking`` correlates against the orbits fused from the ``--fit-hours`` before the scored window, on a
subset of ``--objects`` observed objects (:mod:`bench.correlation_tracking` says how; it writes
``bench/results/correlation_tracking.json`` by default).

An age of 0 is an exact catalogue (the sensors observe the very element sets it holds), which
measures the association at catalogue scale against sensor noise alone.

For each age: one simulation of ``--minutes`` of the embedded sensor registry (6 radars, 3 GEODSS, 3
ISL relays) over every object, with the default disorder; what reaches correlation is emulated as
upstream does it (:mod:`sda.sim.scoring`); a deterministic sample of at most ``--max-observations``
of those observations, whole records (a radar frame's detections together, as the job gets them;
the whole catalogue stays the candidate set), is associated by
:func:`sda.orbit.correlation.correlate_frame` per 60 s bucket, as the correlate job does, and scored:
``right_pct`` (associated with the true object), ``wrong_pct`` (with another one), ``uct_pct``
(uncorrelated although catalogued), ``ambiguous_pct`` (associated and flagged), ``wrong_unflagged``
(wrong and not flagged ambiguous), ``held_by_sensor`` (the held cross-tags by sensor and true
object), ``held_likeliest_right`` (held cross-tags whose likeliest candidate is the true object) and
``right_pct_if_held_committed`` / ``wrong_pct_if_held_committed`` (the figures had every cross-tag been
associated with its likeliest candidate instead of held). ``correlate_s`` is the wall-clock time of the association
(one core). A docked stack (the ISS and the vehicles at it: several catalogue numbers published with
one element set) is one body to the sensors and the simulator (:func:`sda.sim.objects.bodies`): an
association of its detection with any of its numbers is right, counted apart as ``right_same_body``.
``wrong_same_element_set_pct`` is the part of ``wrong_pct`` that went to an object published with
the very element set of the true one (none expected, with the stacks seen as one body);
``wrong_distinguishable_pct`` is the rest. With ``--compare-fixed``
the same observations also go through the old fixed isotropic gate (2 km, or ``--fixed-sigma-m``) for
comparison (``fixed`` figures and ``fixed_correlate_s``). At ``--ages 0`` the element sets are the truth,
so ``--compare-fixed --fixed-sigma-m 1`` is the association with exact orbits: what is left held
there is sensor noise, not the catalogue's uncertainty.

Prints the figures as it goes and, last, one JSON line with ``ages_days`` and, per age (key the age
as text), ``right_pct``, ``wrong_pct``, ``uct_pct``, ``ambiguous_pct`` and the counts; the same JSON
goes to ``--out`` (default ``bench/results/correlation.json``). Exits 2 with a message when the
reference catalogue is not there (a plain clone has no ../shared/data), or on a bad argument.
"""

from __future__ import annotations

import argparse
import datetime as dt
import tempfile
import time
from pathlib import Path

from common import (
    REFERENCE_FILES,
    RESULTS,
    add_dedup_flag,
    dedup_of,
    in_range,
    log,
    reference_catalogue,
    reference_files,
    write_result,
)

FIXED_SIGMA_M = 2000.0  # the gate's former single prediction sigma
AGES = [0.5, 1.0, 3.0, 7.0]
TRACKING_ONLY = ("objects", "fit_hours", "workers", "subset", "work")


def _ages(text: str) -> list[float]:
    try:
        ages = [float(a) for a in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected ages in days separated by commas, e.g. 0.5,1,3,7") from None
    if not ages or any(not 0.0 <= a <= 30.0 for a in ages):
        raise argparse.ArgumentTypeError(f"{text!r}: every age must be in [0, 30] days (0: an exact catalogue)")
    return ages


def parser() -> argparse.ArgumentParser:
    from sda.sim.common import parse_time
    from sda.sim.simulate import positive_int

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ages", type=_ages, default=None,
                   help="element-set ages, days (default 0.5,1,3,7; with --tracking one age, default 1); 0 = an "
                        "exact catalogue (the sensors observe the very element sets it holds: sensor noise alone)")
    p.add_argument("--minutes", type=in_range(120.0, "minutes"), default=10.0,
                   help="simulated minutes per age (default 10)")
    p.add_argument("--max-observations", type=positive_int, default=30_000,
                   help="observations scored per age, a deterministic sample (default 30000)")
    p.add_argument("--start", type=parse_time, default=parse_time("2025-10-05T00:00:00Z"))
    p.add_argument("--seed", type=int, default=1)
    add_dedup_flag(p)
    p.add_argument("--compare-fixed", action="store_true",
                   help="also run a fixed isotropic prediction sigma (--fixed-sigma-m) for every object")
    p.add_argument("--fixed-sigma-m", type=in_range(1e6, "a sigma in metres"), default=FIXED_SIGMA_M,
                   help=f"that sigma, metres per axis (default {FIXED_SIGMA_M:g}: the former gate; 1 at "
                        "--ages 0: exact orbits)")
    p.add_argument("--out", type=Path, default=None,
                   help="default bench/results/correlation.json (--tracking: correlation_tracking.json)")
    p.add_argument("--tracking", action="store_true",
                   help="correlate against the orbits fused from the --fit-hours before "
                        "(bench/correlation_tracking.py)")
    p.add_argument("--objects", type=positive_int, default=None,
                   help="--tracking: observed objects, a subset of the catalogue (default 2000)")
    p.add_argument("--fit-hours", type=in_range(24.0, "hours"), default=None,
                   help="--tracking: hours of observations fused before the scored window (default 6)")
    p.add_argument("--subset", choices=("enriched", "random"), default=None,
                   help="--tracking: the observed objects: the hard cases first, then random (enriched, the default), "
                        "or a random sample of the whole catalogue (random)")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="--tracking: processes fusing the orbits (default 2)")
    p.add_argument("--work", type=Path, default=None,
                   help="--tracking: keep the simulation and the fit hours' fused orbits here, and reuse them in a "
                        "later run with the same arguments (default: a temporary directory)")
    return p


def parse(argv=None) -> argparse.Namespace:
    """The arguments, with the mode's defaults; an option of the other mode is refused."""
    p = parser()
    args = p.parse_args(argv)
    if not args.tracking:
        given = [f"--{name.replace('_', '-')}" for name in TRACKING_ONLY if getattr(args, name) is not None]
        if given:
            p.error(f"{', '.join(given)} only with --tracking")
        args.ages = AGES if args.ages is None else args.ages
        args.out = args.out or RESULTS / "correlation.json"
        return args
    if args.compare_fixed:
        p.error("--compare-fixed is not a --tracking option")
    if args.ages is not None and len(args.ages) != 1:
        p.error(f"--tracking takes one age, not {len(args.ages)}")
    if args.workers is not None and args.workers > 16:
        p.error(f"--workers {args.workers}: at most 16")
    defaults = {"ages": [1.0], "objects": 2000, "fit_hours": 6.0, "workers": 2, "subset": "enriched",
                "out": RESULTS / "correlation_tracking.json"}
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def main(argv=None) -> dict:
    args = parse(argv)
    reference_files("bench/correlation.py")
    if args.tracking:
        from correlation_tracking import run

        result = run(args)
        write_result(args.out, result)
        return result
    from sda.config.settings import Settings
    from sda.orbit.sensors import load_sensors, sensor_sigmas
    from sda.sim import scoring
    from sda.sim.simulate import SimConfig, simulate

    sensors = load_sensors()
    sigmas = sensor_sigmas(sensors)
    gate_km = Settings().correlation_gate_km
    result: dict = {"catalogue": [f"../shared/data/catalog/{f}" for f in REFERENCE_FILES], "minutes": args.minutes,
                    "start": args.start.isoformat(), "seed": args.seed, "gate_km": gate_km,
                    "dedup": dedup_of(args), "max_observations": args.max_observations, "ages_days": args.ages}
    with tempfile.TemporaryDirectory(prefix="sda-bench-correlation-") as tmp:
        root = Path(tmp)
        catalog = reference_catalogue(root / "reference.tle")
        for age in args.ages:
            started = time.monotonic()
            cfg = SimConfig(start=args.start, end=args.start + dt.timedelta(minutes=args.minutes),
                            landing=root / f"landing-{age:g}", catalog=catalog,
                            catalog_out=root / f"catalog-{age:g}.tle", seed=args.seed,
                            tle_age_days=(age, age) if age > 0 else None)
            sim = simulate(cfg)
            obs = scoring.landed_observations(sim, sensors, dedup=dedup_of(args))
            total = len(obs)
            obs = scoring.sample_records(obs, args.max_observations, args.seed)
            ids, sats = scoring.catalogue(sim.catalog_file)
            log(f"age {age:g} d: {len(ids)} objects, {total} observations reach correlation, {len(obs)} scored "
                f"(simulated in {time.monotonic() - started:.0f} s)")
            t0 = time.monotonic()
            lines = scoring.catalogue_lines(sim.catalog_file)
            figures = scoring.score(scoring.correlate(obs, ids, sats, gate_km, sigmas), lines)
            figures["correlate_s"] = round(time.monotonic() - t0, 1)
            figures["observations_landed"] = total
            log(f"age {age:g} d: right {figures['right_pct']:.3f} %, wrong {figures['wrong_pct']:.3f} %, "
                f"uct {figures['uct_pct']:.3f} %, ambiguous {figures['ambiguous_pct']:.3f} % "
                f"({figures['wrong_unflagged']} wrong not flagged; wrong to an identical element set "
                f"{figures['wrong_same_element_set_pct']:.3f} %; right to another number of the observed "
                f"body {figures['right_same_body']}) in {figures['correlate_s']} s")
            if "held_likeliest_right" in figures:
                log(f"age {age:g} d: the likeliest candidate of {figures['held_likeliest_right']} of the "
                    f"{figures['held_ambiguous']} held cross-tags is the observed object; committing them all "
                    f"would make right {figures['right_pct_if_held_committed']:.3f} %, "
                    f"wrong {figures['wrong_pct_if_held_committed']:.3f} %")
            if figures.get("held_by_sensor"):
                log(f"age {age:g} d: cross-tags held (sensor: object): {figures['held_by_sensor']}")
            if args.compare_fixed:
                t0 = time.monotonic()
                matched = scoring.correlate(obs, ids, sats, gate_km, sigmas, prediction_sigma_m=args.fixed_sigma_m)
                fixed = scoring.score(matched, lines)
                fixed["correlate_s"] = round(time.monotonic() - t0, 1)
                fixed["sigma_m"] = args.fixed_sigma_m
                figures["fixed"] = fixed
                log(f"age {age:g} d, fixed {args.fixed_sigma_m:g} m gate: right {fixed['right_pct']:.3f} %, "
                    f"wrong {fixed['wrong_pct']:.3f} %, uct {fixed['uct_pct']:.3f} % in {fixed['correlate_s']} s")
            result[f"{age:g}"] = figures
    write_result(args.out, result)
    return result


if __name__ == "__main__":
    main()
