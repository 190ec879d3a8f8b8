"""Sensor simulator: radar, optical and ISL files in the landing zone, with realistic disorder and a
ground-truth file that says what every record is.

Usage::

    python -m sda.sim.simulate --start 2026-11-21T06:00:00Z --end 2026-11-21T06:30:00Z \\
        [--landing DIR] [--catalog FILE | --objects 300] [--catalog-out FILE] [--max-objects N] \\
        [--sensors FILE] [--seed 1] [--clean | --dup-rate R ... --reorder-rate R] [--sky kind|harsh|storm]
        [--inject-conjunction [--tca ISO] [--miss-m 150]] [--radar-cadence 10] [--tle-age-days 0.5:3]

Geometry comes from :mod:`sda.orbit.frames` (TEME, GMST rotation to ECEF, WGS-84 sites); every object is
propagated on the union time grid of a 5-minute chunk and moved to each record's exact event time (a few ms
later) by a second-order Taylor step (error < 1 cm). The sky (``--sky``): :mod:`sda.sim.sky`.

With ``--tle-age-days DAYS`` (or ``LO:HI``, one age per object drawn uniformly) the catalogue is wrong
the way real element sets are (:mod:`sda.sim.tle_error`): the catalogue written holds the published
elements with epochs that many days before ``--start``; the sensors observe each object's *true*
orbit, those elements perturbed by an error drawn from :mod:`sda.orbit.uncertainty`'s model for its regime
and age. Without it the sensors observe the very element sets written to the catalogue.

Files (``<chunk>`` is the UTC start of the 5-minute chunk of the events, ``YYYYmmddTHHMMSSZ``):

* ``radar/<SENSOR>_<chunk>_<n>.jsonl``: n=0 the regular delivery, 1 a re-delivery file (only when no later
  regular file of that sensor exists), 2 the sensor's late file (all its late frames). One frame per line;
  frames with no detection are not sent (frame numbers then skip).
* ``optical/<STATION>_<chunk>.csv``, ``..._1.csv`` / ``..._2.csv`` (as above); line 0 is the format's
  version (``#version=1.0``), line 1 the header (:data:`sda.lake.wire_formats.OPTICAL_HEADER`);
  ``isl/<SRC>_<chunk>.bcn``, ``..._1.bcn`` / ``..._2.bcn``.
* Unknown-sensor records are in their own files, named after the unknown sensor; the harsher skies land
  ``space_weather/SW-<issued>.txt`` every three hours (:mod:`sda.sim.weather`).

Truth, ``_truth/<sim_id>.jsonl`` (outside the kind directories), one JSON object per radar
detection / optical row / beacon / malformed line, sorted by (file, record_no, det_index)::

    {"key": "radar/EGLIN_20261121T060000Z_0.jsonl#3#1", "kind": "radar", "sensor_id": "EGLIN",
     "file": "radar/EGLIN_20261121T060000Z_0.jsonl", "record_no": 3, "det_index": 1,
     "event_time": "2026-11-21T06:00:30.004Z", "norad_id": 70012, "disorder": "none",
     "duplicate_of": null}

``record_no`` is the 0-based line number in the file (an optical file's version and header are
lines 0 and 1, so its data rows start at 2); ``det_index`` the detection's index in the radar frame's
``dets`` (null for optical,
ISL and malformed lines); ``key`` is ``file#record_no`` plus ``#det_index`` for radar detections;
``duplicate_of`` the ``key`` of the original for ``redelivery`` (verbatim copy in a later file) and
``reprocessed`` (same sensor, event time shifted <= 50 ms, values jittered < 0.1 sigma) records.
``norad_id`` is null for malformed and unknown-sensor records. ``disorder`` is one of
none | redelivery | reprocessed | malformed | impossible | unknown_sensor | late.

Catalogue entries with one element set (a docked stack: the ISS and the vehicles at it) are one body
(:func:`sda.sim.objects.bodies`): the sensors report one detection of it, not one per catalogue
number. Its rows name its lowest number as ``norad_id`` and list all of them as ``same_body``; an
association with any of them is right.

With ``--tle-age-days`` each observation's truth row also has ``error_rtn_m``: the true position minus
the catalogue's, on the catalogue orbit's radial / along-track / cross-track axes (m), at its event
time, and ``_truth/<sim_id>.orbits.jsonl`` has one row per object: its regime, age, catalogue and
true element sets (TLE lines), the model's sigmas and the realised error at the run's middle.

``_truth/<sim_id>.summary.json`` has counts per kind and disorder, the catalogue file used (and its
sha256), the files written and the injected conjunction (ids, TCA, designed and achieved miss).

Same arguments and seed give byte-identical files. File modification times are set from the event
times (regular files: chunk end + 30..420 s, so neighbouring files are not always in event order;
re-delivery files later; late files last) and capped at the current time.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from sda.orbit.catalog import synthetic
from sda.orbit.sensors import load_sensors
from sda.sim.arguments import number_in, positive_int  # noqa: E402,F401 (the CLI's types; benches import them here)
from sda.sim.arguments import positive_float as _positive_float  # noqa: E402
from sda.sim.common import (
    CHUNK_MS,
    DISORDERS,
    MAX_SPAN,
    MU,
    RATE_NAMES,
    chunk_label,
    iso_ms,
    iso_us,
    iso_utc,
    parse_time,
    stream_seed,
)
from sda.sim.conjunction import PRIMARY_ID, SECONDARY_ID, closest_approach, design_conjunction, rv_to_elements
from sda.sim.disorder import UNKNOWN_IDS, apply_disorder
from sda.sim.formats import write_landing
from sda.sim.objects import Objects, Sgp4Truth, load_objects, sha256_file, true_orbits
from sda.sim.observe import ISL_FRACTION, OPTICAL_EXPOSURE_S, observe
from sda.sim.sky import SKIES, Sky
from sda.sim.tle_error import MAX_AGE_DAYS, parse_age
from sda.sim.truth import Record, Truth, write_truth
from sda.sim.weather import storm_onset

__all__ = [  # the simulator's API; the names after SimulationResult are re-exported from sda.sim.*
    "SimConfig", "SimulationResult", "simulate", "main", "build_parser", "config_from_args",
    "CHUNK_MS", "MAX_SPAN", "DISORDERS", "RATE_NAMES", "UNKNOWN_IDS", "PRIMARY_ID", "SECONDARY_ID", "MU",
    "OPTICAL_EXPOSURE_S", "ISL_FRACTION", "iso_ms", "iso_us", "chunk_label", "parse_time", "Truth", "Record",
    "rv_to_elements", "closest_approach", "design_conjunction",
]

TRUTH_MODELS = ("numerical", "sgp4")

# --- configuration ----------------------------------------------------------------------------------

@dataclasses.dataclass
class SimConfig:
    start: dt.datetime
    end: dt.datetime
    landing: Path | None = None  # default: Settings().landing
    catalog: Path | None = None  # default: generate with sda.orbit.catalog.synthetic
    catalog_out: Path | None = None  # default: Settings().catalog_file
    objects: int = 300
    max_objects: int | None = None
    sensors: Path | None = None
    seed: int = 1
    dup_rate: float = 0.02
    reprocess_rate: float = 0.02
    late_rate: float = 0.02
    malformed_rate: float = 0.02
    impossible_rate: float = 0.02
    unknown_sensor_rate: float = 0.02
    reorder_rate: float = 0.05
    inject_conjunction: bool = False
    tca: dt.datetime | None = None  # default: start + 2 h
    miss_m: float = 150.0
    conjunction_burn_h: float | None = None  # the primary reaches the TCA through a burn this long before it
    radar_cadence_s: float = 10.0
    optical_cadence_s: float = 30.0
    isl_cadence_s: float = 60.0
    tle_age_days: tuple[float, float] | None = None  # element-set age range (days): catalogue errors on
    truth: str = "numerical"  # the true trajectories: numerical (sda.sim.dynamics) or sgp4 (test device)
    manoeuvre_share: float = 0.0  # share of the bodies that manoeuvre (sda.sim.events)
    manoeuvre_rate: float = 3.0  # burns per manoeuvring body and day
    uncatalogued_share: float = 0.0  # share of the observed bodies left out of the catalogue
    launch: bool = False  # a fresh launch of several objects flying close together, in no catalogue
    format: str = "native"  # native: the project's own formats; tdm: radar and optical as CCSDS TDM (sda.sim.tdm)
    stream: int | None = None  # a continuation block's random stream (sda.sim.feed); None: a simulation of its own
    # the CLI's, make run's and the service's sky: sensor biases, heavy-tailed noise, weather, tumbling (sda.sim.sky);
    # storm: and a storm; kind: none of it (every sky's radar and optical measurements carry light time)
    sky: str = "harsh"
    storm_onset: dt.datetime | None = None  # --sky storm: default the 3-hour boundary nearest the middle

    def validate(self) -> None:
        for name in ("start", "end") + (("tca",) if self.tca else ()) + (("storm_onset",) if self.storm_onset else ()):
            value = getattr(self, name)
            if value.tzinfo is None:
                setattr(self, name, value.replace(tzinfo=dt.timezone.utc))
        if self.end <= self.start:
            raise ValueError(f"--end {iso_utc(self.end)} must be after --start {iso_utc(self.start)}")
        if self.end - self.start > MAX_SPAN:
            raise ValueError(f"--start..--end spans {self.end - self.start}; at most {MAX_SPAN.days} days")
        for name in RATE_NAMES + ("reorder_rate",):
            value = getattr(self, name)
            if not 0.0 <= value <= 0.5:
                raise ValueError(f"--{name.replace('_', '-')} {value}: expected a fraction in [0, 0.5]")
        if not 1 <= self.objects <= synthetic.MAX_ID - synthetic.FIRST_ID + 1:
            raise ValueError(f"--objects {self.objects}: expected 1..{synthetic.MAX_ID - synthetic.FIRST_ID + 1}")
        if self.max_objects is not None and self.max_objects < 1:
            raise ValueError(f"--max-objects {self.max_objects}: expected at least 1")
        if not 0.0 < self.miss_m <= 5000.0:
            raise ValueError(f"--miss-m {self.miss_m}: expected a distance in (0, 5000] m")
        for name in ("radar_cadence_s", "optical_cadence_s", "isl_cadence_s"):
            value = getattr(self, name)
            if not 0.1 <= value <= 3600.0:
                raise ValueError(f"{name}={value}: expected 0.1..3600 s")
        if self.tle_age_days is not None:
            lo, hi = self.tle_age_days
            if not 0.0 < lo <= hi <= MAX_AGE_DAYS:
                raise ValueError(f"--tle-age-days {lo:g}:{hi:g}: expected 0 < LO <= HI <= {MAX_AGE_DAYS:g}")
        for name in ("manoeuvre_share", "uncatalogued_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"--{name.replace('_', '-')} {getattr(self, name)}: expected a share in [0, 1]")
        if not 0.0 <= self.manoeuvre_rate <= 50.0:
            raise ValueError(f"--manoeuvre-rate {self.manoeuvre_rate}: expected 0..50 burns per body and day")
        if (self.manoeuvre_share or self.launch) and self.truth != "numerical":
            raise ValueError("--manoeuvre-share and --launch need --truth numerical")
        if self.sky not in SKIES:
            raise ValueError(f"--sky {self.sky!r}: expected one of {', '.join(SKIES)}")
        if self.sky == "storm" and self.storm_onset is None:  # resolved once: a continuation keeps it
            self.storm_onset = dt.datetime.fromtimestamp(storm_onset(self), dt.timezone.utc)
        if self.storm_onset is not None and (self.sky != "storm" or abs(self.storm_onset - self.start) > MAX_SPAN):
            raise ValueError(f"--storm-onset {iso_utc(self.storm_onset)}: needs --sky storm and a time within "
                             f"{MAX_SPAN.days} days of --start")
        if self.truth not in TRUTH_MODELS:
            raise ValueError(f"--truth {self.truth!r}: expected one of {', '.join(TRUTH_MODELS)}")
        if self.conjunction_burn_h is not None and not (self.inject_conjunction and self.truth == "numerical"
                                                        and self.conjunction_burn_h > 0):
            raise ValueError(f"--conjunction-burn-h {self.conjunction_burn_h:g}: needs --inject-conjunction, "
                             "--truth numerical and a positive number of hours")
        tca = self.tca or self.start + dt.timedelta(hours=2)
        if self.conjunction_burn_h is not None and tca - dt.timedelta(hours=self.conjunction_burn_h) <= self.start:
            raise ValueError(f"--conjunction-burn-h {self.conjunction_burn_h:g}: the burn must fall between --start "
                             f"and the TCA ({iso_utc(tca)})")
        if self.tca is not None and abs(self.tca - self.start) > MAX_SPAN:
            raise ValueError(f"--tca {iso_utc(self.tca)} is more than {MAX_SPAN.days} days from --start")


@dataclasses.dataclass
class SimulationResult:
    sim_id: str
    landing: Path
    truth_file: Path
    summary_file: Path
    catalog_file: Path
    files: list[str]  # relative to the landing root
    counts: dict[str, dict[str, int]]
    injected: dict | None


# --- the simulation -------------------------------------------------------------------------------------------

def _sim_id(cfg: SimConfig, catalog_sha: str) -> str:
    parts = [iso_utc(cfg.start), iso_utc(cfg.end), cfg.seed, catalog_sha, cfg.max_objects, cfg.inject_conjunction,
             iso_utc(cfg.tca) if cfg.tca else "", cfg.miss_m,
             cfg.radar_cadence_s, cfg.optical_cadence_s, cfg.isl_cadence_s]
    parts += [getattr(cfg, name) for name in RATE_NAMES + ("reorder_rate",)]
    if cfg.tle_age_days is not None:  # (appended only when set: exact-catalogue ids are unchanged)
        parts.append(list(cfg.tle_age_days))
    if cfg.truth != "numerical":
        parts.append(cfg.truth)
    if cfg.manoeuvre_share or cfg.uncatalogued_share or cfg.launch:
        parts.append([cfg.manoeuvre_share, cfg.manoeuvre_rate, cfg.uncatalogued_share, cfg.launch])
    if cfg.stream is not None:
        parts.append(["stream", cfg.stream])
    if cfg.conjunction_burn_h is not None:
        parts.append(["conjunction burn", cfg.conjunction_burn_h])
    if cfg.sky != "kind":
        parts.append(["sky", cfg.sky] + ([iso_utc(cfg.storm_onset)] if cfg.storm_onset else []))
    digest = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:10]
    return f"sim_{cfg.start.strftime('%Y%m%dT%H%M%SZ')}_{digest}"


def simulate(cfg: SimConfig) -> SimulationResult:
    """Run the simulator; see the module docstring for what is written where."""
    from sda.config.settings import load_settings

    cfg.validate()
    settings = load_settings()
    landing = Path(cfg.landing) if cfg.landing else settings.landing
    sensors = load_sensors(cfg.sensors)
    entries, catalog_file, injected, errors = load_objects(cfg, settings)
    objs = Objects(entries, None if errors is None else errors.true_sats)
    objs.truth = true_orbits(cfg, objs, injected) if cfg.truth == "numerical" else Sgp4Truth(objs.sats)
    return observe_and_write(cfg, objs, sensors, catalog_file, injected, errors, landing, landing)


def observe_and_write(cfg: SimConfig, objs: Objects, sensors: dict, catalog_file: Path, injected: dict | None, errors,
                      files_to: Path, landing: Path, hold_mtimes: bool = False) -> SimulationResult:
    """Observe ``objs`` over ``[cfg.start, cfg.end)``, write the files into ``files_to`` (their modification
    times the delivery times, capped at now unless ``hold_mtimes``) and the truth into ``landing/_truth``."""
    radars = [s for s in sensors.values() if s.kind == "radar"]
    opticals = [s for s in sensors.values() if s.kind == "optical"]
    isls = [s for s in sorted(sensors.values(), key=lambda s: s.sensor_id) if s.kind == "isl"]
    catalog_sha = sha256_file(catalog_file)
    objs.sky = Sky(sensors.values(), cfg) if cfg.sky != "kind" else None
    base = observe(cfg, objs, radars, opticals, isls)
    files = apply_disorder(cfg, sensors, base, np.random.default_rng(stream_seed(cfg, 4)))
    sim_id = _sim_id(cfg, catalog_sha)
    truth_rows, written = write_landing(files_to, files, tdm=cfg.format == "tdm", cap_mtime=not hold_mtimes)
    truth_file, summary_file, counts, inj = write_truth(cfg, landing, sim_id, truth_rows, files, catalog_file,
                                                        catalog_sha, injected, len(objs.norad), errors, objs.same_body,
                                                        objs.truth if cfg.truth == "numerical" else None,
                                                        _hidden(objs, catalog_file))
    if objs.sky is not None:  # the sky's errors in the truth, and the space-weather files operators get
        written = written + objs.sky.record(cfg, summary_file, files_to, cap_mtime=not hold_mtimes)
    return SimulationResult(sim_id, landing, truth_file, summary_file, catalog_file, written,
                            counts, inj)


def _hidden(objs: Objects, catalog_file: Path) -> list[int]:
    """The observed bodies the catalogue file does not hold (sda.sim.events: uncatalogued, a fresh launch)."""
    from sda.orbit.catalog import load_catalog

    listed = {e.norad_id for e in load_catalog(catalog_file)[0]}
    return sorted(int(n) for n in objs.norad if int(n) not in listed)


# --- command line ----------------------------------------------------------------------------------------------

_rate = number_in(0.0, 0.5, "a fraction")
_share = number_in(0.0, 1.0, "a share")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sda.sim.simulate",
                                description="Write simulated radar/optical/ISL sensor files (with disorder and truth) "
                                            "to the landing zone.")
    p.add_argument("--start", type=parse_time, required=True, help="first event time, ISO-8601 UTC")
    p.add_argument("--end", type=parse_time, required=True,
                   help="end of the events (exclusive), at most 7 days after --start")
    p.add_argument("--landing", type=Path,
                   help="landing directory: the settings' landing (default) or a directory inside it")
    p.add_argument("--catalog", type=Path,
                   help="TLE/OMM catalogue to observe (default: generate one with sda.orbit.catalog.synthetic)")
    p.add_argument("--catalog-out", type=Path,
                   help="where the catalogue used is written (default: the settings' catalog_file); "
                        "inside the catalog_file's directory or the landing zone")
    p.add_argument("--objects", type=positive_int, default=None,
                   help="generated catalogue size (default: the setting SDA_SIM_OBJECTS, 300)")
    p.add_argument("--max-objects", type=positive_int, help="observe a deterministic subsample of the catalogue")
    p.add_argument("--sensors", type=Path, help="sensor registry CSV (default: the embedded registry)")
    p.add_argument("--seed", type=int, default=1)
    for name in RATE_NAMES:
        p.add_argument("--" + name.replace("_", "-"), type=_rate, default=0.02, help="fraction (default 0.02)")
    p.add_argument("--reorder-rate", type=_rate, default=0.05,
                   help="chance of swapping neighbouring lines (default 0.05)")
    p.add_argument("--clean", action="store_true", help="no disorder at all (every rate 0)")
    p.add_argument("--inject-conjunction", action="store_true",
                   help="add objects 99901/99902 on a near-collision course")
    p.add_argument("--tca", type=parse_time, help="time of closest approach (default: start + 2 h)")
    p.add_argument("--miss-m", type=_positive_float, default=150.0, help="designed miss distance, m (default 150)")
    p.add_argument("--conjunction-burn-h", type=_positive_float, metavar="H",
                   help="the primary reaches the TCA through a 1 m/s along-track burn H hours before it (the "
                        "catalogue holds its pre-burn orbit, which misses the secondary by far)")
    p.add_argument("--radar-cadence", type=_positive_float, default=10.0,
                   help="seconds between radar frames (default 10)")
    p.add_argument("--tle-age-days", type=_age, metavar="DAYS|LO:HI",
                   help="catalogue element sets this many days old (LO:HI: drawn per object), with errors drawn from "
                        "the uncertainty model; the sensors observe the true orbits (default: an exact catalogue)")
    p.add_argument("--format", choices=("native", "tdm"), default="native",
                   help="tdm: radar and optical files as CCSDS TDM (KVN) under tdm/ (default native)")
    p.add_argument("--manoeuvre-share", type=_share, default=0.0,
                   help="share of the bodies that manoeuvre (default 0; GEO ones keep station)")
    p.add_argument("--manoeuvre-rate", type=_positive_float, default=3.0,
                   help="burns per manoeuvring body and day (default 3)")
    p.add_argument("--uncatalogued-share", type=_share, default=0.0,
                   help="share of the observed bodies left out of the catalogue (default 0)")
    p.add_argument("--launch", action="store_true",
                   help="a fresh launch of 6 objects (99911-99916) flying close together, in no catalogue")
    p.add_argument("--sky", choices=SKIES, default="harsh",
                   help="harsh (default): sensor biases that drift, true noise off the registry's with a heavy tail, "
                        "space weather varying within the day (files landed under space_weather/), "
                        "tumbling debris (sda.sim.sky, sda.sim.weather; recorded in the truth summary); storm: harsh "
                        "with a geomagnetic storm; kind: white noise at the registry's sigmas, the forecast's "
                        "space weather. Radar and optical measurements carry light time in every sky")
    p.add_argument("--storm-onset", type=parse_time, help="--sky storm: the storm's onset (default: mid-run)")
    p.add_argument("--truth", choices=TRUTH_MODELS, default="numerical",
                   help="what the sensors observe: numerical (default) trajectories of a force model the pipeline "
                        "does not share (sda.sim.dynamics), or sgp4: the true element sets' own SGP4 trajectories, a "
                        "test device for measurement models (an accuracy figure against it proves nothing)")
    return p


def _age(text: str) -> tuple[float, float]:
    try:
        return parse_age(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--tle-age-days ")) from None


def config_from_args(argv: list[str] | None = None) -> SimConfig:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.catalog is not None and not args.catalog.is_file():
        parser.error(f"--catalog {args.catalog}: no such file")
    if args.sensors is not None and not args.sensors.is_file():
        parser.error(f"--sensors {args.sensors}: no such file")
    if args.tca is not None and not args.inject_conjunction:
        parser.error("--tca needs --inject-conjunction")
    cfg = SimConfig(
        start=args.start, end=args.end, landing=args.landing, catalog=args.catalog, catalog_out=args.catalog_out,
        objects=args.objects if args.objects is not None else _sim_objects(), max_objects=args.max_objects,
        sensors=args.sensors, seed=args.seed,
        reorder_rate=0.0 if args.clean else args.reorder_rate, inject_conjunction=args.inject_conjunction,
        tca=args.tca, miss_m=args.miss_m, conjunction_burn_h=args.conjunction_burn_h,
        radar_cadence_s=args.radar_cadence, tle_age_days=args.tle_age_days,
        truth=args.truth, format=args.format, manoeuvre_share=args.manoeuvre_share,
        manoeuvre_rate=args.manoeuvre_rate, uncatalogued_share=args.uncatalogued_share, launch=args.launch,
        sky=args.sky, storm_onset=args.storm_onset,
        **{name: 0.0 if args.clean else getattr(args, name) for name in RATE_NAMES},
    )
    try:
        cfg.validate()
        confine_outputs(cfg)
    except ValueError as exc:  # sda.config.settings.SettingsError and sda.config.paths.UnsafePathError too
        parser.error(str(exc))
    return cfg


def confine_outputs(cfg: SimConfig) -> None:
    """The command line may only write where the settings say: ``--landing`` is the settings'
    landing zone or a directory inside it, ``--catalog-out`` lies in the catalogue directory (that of
    ``catalog_file``) or the landing zone (``..`` and symlinks resolved; a relative path is taken from
    the current directory). Inputs (``--catalog``, ``--sensors``) are only read and stay unconfined.
    Replaces the paths by their resolved form; raises :class:`sda.config.paths.UnsafePathError`."""
    from sda.config.paths import confine
    from sda.config.settings import load_settings

    settings = load_settings()
    if cfg.landing is not None:
        cfg.landing = confine(cfg.landing, [settings.landing], "--landing")
    if cfg.catalog_out is not None:
        cfg.catalog_out = confine(cfg.catalog_out, [settings.catalog_file.parent, settings.landing], "--catalog-out")


def main(argv: list[str] | None = None) -> int:
    cfg = config_from_args(argv)
    started = time.monotonic()
    result = simulate(cfg)
    total = sum(sum(c.values()) for c in result.counts.values())
    print(f"{result.sim_id}: {len(result.files)} files, {total} records into {result.landing} "
          f"in {time.monotonic() - started:.1f} s; catalogue {result.catalog_file}; truth {result.truth_file}")
    for kind, counts in sorted(result.counts.items()):
        print(f"  {kind:8s} " + " ".join(f"{k}={v}" for k, v in counts.items() if v))
    if cfg.tle_age_days is not None:
        lo, hi = cfg.tle_age_days
        print(f"  catalogue element sets {lo:g}-{hi:g} days old, observed on their true orbits "
              f"(_truth/{result.sim_id}.orbits.jsonl)")
    if result.injected:
        inj = result.injected
        print(f"  conjunction {inj['primary']}/{inj['secondary']} TCA {inj['achieved_tca']} "
              f"miss {inj['achieved_miss_m']:.1f} m (designed {inj['designed_miss_m']:.1f} m)")
    return 0


def _sim_objects() -> int:
    """The generated catalogue's size when --objects is not given: the setting SDA_SIM_OBJECTS."""
    from sda.config.settings import load_settings

    return load_settings().sim_objects


if __name__ == "__main__":
    sys.exit(main())

