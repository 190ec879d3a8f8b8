"""The simulated sensors keep reporting: a simulation continued chunk by chunk, each file landing when the
sensor would deliver it (``make run`` after its first run, until Ctrl-C).

    python -m sda.sim.feed init                 take the newest simulation in the landing zone as the sky to continue
    python -m sda.sim.feed run [--poll-s 15]    continue it until stopped (SIGINT or SIGTERM)
    python -m sda.sim.feed catch-up [--max-gap-h 3]
                                                once, when ``make run`` resumes: observe from where the sky was left
                                                up to now and print START END TCA (exit 3: nothing to
                                                resume; 4: left more than 3 days ago)

**One sky.** The world -- catalogue, element-set errors, true trajectories, the injected pair -- is the first
simulation's (:mod:`sda.sim.simulate` records its configuration in its summary; :func:`world_objects` rebuilds
it, deterministically, without rewriting the catalogue). Each block ``[observed_until, now)`` (whole 5-minute
chunks, so no landing file is written twice) is observed on the true trajectories *continued* from the newest
truth ephemeris (:func:`sda.sim.dynamics.extend`: one integration, never restarted, so a block boundary is
invisible in the orbits), with a random stream of its own (``SimConfig.stream``). A block's truth is the
simulator's usual ``_truth/<sim_id>.jsonl`` and summary; its ephemeris file covers the last
:data:`KEEP_TRUTH_H` hours (older blocks' ephemerides are deleted: the newest covers them), and a block's
truth goes when its files have (``SDA_LANDING_RETENTION_H`` after it was written: :func:`prune_truth`).

**Delivered when due.** ``run`` writes a block's files to ``landing/_feed/pending/`` with their delivery
times as modification times (regular files 30-420 s after their chunk, re-deliveries 10-25 min, the late
files 10 min after the rest: :mod:`sda.sim.disorder`) and moves each into the landing zone when its time has
come: a rename, so the landing watch sees a new file and ingest's ledger takes it once. Ingest and the
landing watch skip names starting with ``_``, so nothing pending is read early.

**Resume.** The state (``landing/_feed/state.json``: the world's configuration, how far it is observed, the
newest truth summary) survives Ctrl-C. ``catch-up`` releases what was pending, then observes the time the
service was down, at most ``--max-gap-h`` hours of it (before that the sensors are taken to have been down
too: a tracking gap, not a backlog), with files landing at once. Blocks after a restart take the stream
number after the last one, so no random draw repeats.

Left out: the world ends where the first simulation drew it: manoeuvres (``--manoeuvre-share``) are drawn
over the first window only, and the catalogue file stays the one written then (its element sets age, as a
catalogue nobody updates would).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

from sda.sim.common import CHUNK_MS, iso_utc, parse_time

KEEP_TRUTH_H = 30.0  # the truth ephemeris kept: a day of alerts' TCAs scored, and margin
STATE = "_feed/state.json"
PENDING = "_feed/pending"
NOT_RESUMABLE = 3


def floor_chunk(t: dt.datetime) -> dt.datetime:
    ms = math.floor(t.timestamp() * 1000 / CHUNK_MS) * CHUNK_MS
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc)


def world_config(config: dict):
    """The :class:`sda.sim.simulate.SimConfig` a summary's ``config`` (:func:`sda.sim.truth.config_json`) holds."""
    from sda.sim.simulate import SimConfig

    kwargs = {"sky": "kind", **config}  # a summary written before there were skies: the kinder one
    for name in ("start", "end", "tca", "storm_onset"):
        if kwargs.get(name):
            kwargs[name] = parse_time(kwargs[name])
    for name in ("landing", "catalog", "catalog_out", "sensors"):
        if kwargs.get(name):
            kwargs[name] = Path(kwargs[name])
    if kwargs.get("tle_age_days") is not None:
        kwargs["tle_age_days"] = tuple(kwargs["tle_age_days"])
    known = {f.name for f in dataclasses.fields(SimConfig)}
    return SimConfig(**{k: v for k, v in kwargs.items() if k in known})


def world_objects(world, settings):
    """The world's observed objects (:class:`sda.sim.objects.Objects`, truth not set), its catalogue file and
    injected pair, rebuilt as its first simulation built them."""
    from sda.sim.objects import Objects, load_objects

    entries, catalog_file, injected, errors = load_objects(world, settings, write_catalog=False)
    objs = Objects(entries, None if errors is None else errors.true_sats)
    return objs, catalog_file, injected, errors


def continued_truth(summary_file: Path, until_unix: float, keep_from_unix: float):
    """The true orbits of a simulation's summary, continued to cover ``until_unix`` and trimmed to start at
    or before ``keep_from_unix`` (:class:`sda.sim.objects.TrueOrbits`)."""
    from sda.sim import dynamics
    from sda.sim.objects import TrueOrbits
    from sda.sim.truth import body_params, load_truth_files, weather_of

    eph, last, bodies = load_truth_files(summary_file)
    params = body_params(bodies)
    start = np.array([[np.nan if x is None else x for x in b["start_gcrf_m"]] for b in bodies], dtype=float)
    eph, last = dynamics.extend(eph, last, params, until_unix, weather_of(summary_file))
    drop = max(0, int(math.floor((keep_from_unix - eph.t0) / eph.step)) - dynamics.LAGRANGE_POINTS)
    if drop:
        burns = [b for b in eph.burns if b[1] >= eph.t0 + drop * eph.step]
        eph = dynamics.Ephemeris(eph.norad, eph.t0 + drop * eph.step, eph.step, eph.states[:, drop:], burns)
    return TrueOrbits(eph, params, start, last, [])


class Feed:
    """One world's continuation (module docstring): its state, objects and truth, kept between blocks."""

    def __init__(self, settings, state: dict):
        self.settings, self.state = settings, state
        self.landing = Path(settings.landing)
        self.world = world_config(state["world"])
        self.objs, self.catalog_file, self.injected, self.errors = world_objects(self.world, settings)
        self.truth_summary = self.landing / state["truth"]

    @classmethod
    def load(cls, settings) -> "Feed | None":
        path = Path(settings.landing) / STATE
        return cls(settings, json.loads(path.read_text())) if path.is_file() else None

    @property
    def observed_until(self) -> dt.datetime:
        return parse_time(self.state["observed_until"])

    def observe(self, start: dt.datetime, end: dt.datetime, hold: bool) -> int:
        """Simulate ``[start, end)`` (whole chunks); files pending (``hold``) or landed at once. Returns files."""
        from sda.orbit.sensors import load_sensors
        from sda.sim.simulate import observe_and_write

        truth = continued_truth(self.truth_summary, end.timestamp(), end.timestamp() - KEEP_TRUTH_H * 3600.0)
        if not np.array_equal(truth.ephemeris.norad, self.objs.norad):
            raise RuntimeError(f"the truth {self.truth_summary} is not of the world's objects: start afresh")
        self.objs.truth = truth
        block = self.state.get("blocks", 0) + 1
        cfg = dataclasses.replace(self.world, start=start, end=end, stream=block, landing=self.landing)
        files_to = self.landing / PENDING if hold else self.landing
        result = observe_and_write(cfg, self.objs, load_sensors(self.world.sensors), self.catalog_file,
                                   self.injected, self.errors, files_to, self.landing, hold_mtimes=hold)
        previous = self.truth_summary
        self.truth_summary = result.summary_file
        self.state.update(observed_until=iso_utc(end), blocks=block,
                          truth=result.summary_file.relative_to(self.landing).as_posix())
        self.save()
        _drop_ephemeris(previous, keep=result.summary_file)
        return len(result.files)

    def save(self) -> None:
        path = self.landing / STATE
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=1) + "\n")
        os.replace(tmp, path)


def _drop_ephemeris(summary_file: Path, keep: Path) -> None:
    """Delete the ephemeris files of ``summary_file`` (an earlier block's) unless ``keep``'s are the same."""
    if summary_file == keep or not summary_file.is_file():
        return
    old = json.loads(summary_file.read_text()).get("truth") or {}
    new = json.loads(keep.read_text()).get("truth") or {}
    root = summary_file.parent.parent
    for key in ("ephemeris_file", "bodies_file"):
        if old.get(key) and old[key] != new.get(key):
            (root / old[key]).unlink(missing_ok=True)


def release(landing: Path, now: float | None = None) -> list[str]:
    """Move the pending files whose delivery time has come into the landing zone; their paths."""
    now = time.time() if now is None else now
    pending = landing / PENDING
    moved = []
    for path in sorted(pending.rglob("*")) if pending.is_dir() else []:
        if not path.is_file() or path.stat().st_mtime > now:
            continue
        rel = path.relative_to(pending)
        target = landing / rel
        if target.exists():
            print(f"feed: {rel} is already in the landing zone; left pending", file=sys.stderr)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        early = path.stat().st_mtime > time.time()  # landed before it was due (a resume): it lands now
        os.replace(path, target)
        if early:
            os.utime(target, (time.time(), time.time()))
        moved.append(rel.as_posix())
    return moved


def prune_truth(landing: Path, retention_h: float, keep: Path, now: float | None = None) -> int:
    """Delete the truth files of the feed's blocks (summaries with a ``stream``) written more than
    ``retention_h`` ago (the landing retention: their files are gone by then), never ``keep``'s; how many."""
    if retention_h <= 0:
        return 0
    horizon = (time.time() if now is None else now) - retention_h * 3600.0
    deleted = 0
    for path in (landing / "_truth").glob("*.summary.json"):
        if path == keep or path.stat().st_mtime >= horizon:
            continue
        summary = json.loads(path.read_text())
        if (summary.get("config") or {}).get("stream") is None:
            continue  # a simulation of its own (the world): its owner's
        for name in (summary.get("truth_file"), (summary.get("tle_error") or {}).get("orbits_file"),
                     (summary.get("events") or {}).get("file")):
            if name:
                (landing / name).unlink(missing_ok=True)
        path.unlink()
        deleted += 1
    return deleted


def init(settings) -> dict:
    """The state of a new feed: the newest simulation of its own in the landing zone is the world."""
    landing = Path(settings.landing)
    summaries = sorted((landing / "_truth").glob("*.summary.json"), key=lambda p: (p.stat().st_mtime, p.name))
    for path in reversed(summaries):
        summary = json.loads(path.read_text())
        config = summary.get("config")
        if config and config.get("stream") is None and summary.get("truth"):
            end = parse_time(summary["end"])
            observed = floor_chunk(end) if floor_chunk(end) == end else floor_chunk(end) + dt.timedelta(
                milliseconds=CHUNK_MS)
            state = {"world": config, "truth": path.relative_to(landing).as_posix(),
                     "observed_until": iso_utc(observed), "blocks": 0}
            Feed(settings, state).save()
            return state
    raise LookupError(f"no simulation with a numerical truth in {landing / '_truth'} (sda simulate writes one)")


def run(settings, poll_s: float, stop: list) -> None:
    """Observe each whole chunk once it has passed, release files when due, until ``stop`` holds something."""
    feed = Feed.load(settings)
    if feed is None:
        raise LookupError("no feed state: `python -m sda.sim.feed init` first")
    landing = Path(settings.landing)
    print(f"feed: continuing {feed.state['world'].get('start')} sky from {feed.state['observed_until']}", flush=True)
    while not stop:
        now = dt.datetime.now(dt.timezone.utc)
        end = floor_chunk(now)
        if end > feed.observed_until:
            started = time.monotonic()
            start = max(feed.observed_until, end - dt.timedelta(hours=MAX_BLOCK_H))
            n = feed.observe(start, end, hold=True)
            pruned = prune_truth(landing, settings.landing_retention_h, feed.truth_summary)
            print(f"feed: {iso_utc(start)} .. {iso_utc(end)} observed, {n} files pending "
                  f"({time.monotonic() - started:.1f} s){f'; {pruned} old blocks truth deleted' if pruned else ''}",
                  flush=True)
        moved = release(landing)
        if moved:
            print(f"feed: {len(moved)} files landed ({', '.join(moved[:3])}{', ...' if len(moved) > 3 else ''})",
                  flush=True)
        for _ in range(int(max(1.0, poll_s))):
            if stop:
                break
            time.sleep(1.0)


def catch_up(settings, max_gap_h: float) -> tuple[dt.datetime, dt.datetime, str]:
    """Resume (module docstring): (start, end, the injected pair's TCA) of the time just observed."""
    feed = Feed.load(settings)
    if feed is None:
        raise LookupError("no feed state")
    end = floor_chunk(dt.datetime.now(dt.timezone.utc))
    if end - feed.observed_until > dt.timedelta(days=MAX_RESUME_DAYS):
        raise TooOld(f"the simulated sky was last observed at {feed.state['observed_until']}, more than "
                     f"{MAX_RESUME_DAYS} days ago (its truth would be integrated over the whole gap): "
                     f"`make clean` to start afresh")
    release(Path(settings.landing), now=math.inf)
    start = max(feed.observed_until, end - dt.timedelta(hours=max_gap_h))
    if end > start:
        feed.observe(start, end, hold=False)
    return start, end, (feed.injected or {}).get("tca") or iso_utc(end)


MAX_BLOCK_H = 3.0  # a feed that fell behind (a suspended machine) observes at most this much at once
MAX_RESUME_DAYS = 3
TOO_OLD = 4


class TooOld(Exception):
    """The sky was left too long ago to resume."""


def sky_of(settings) -> str:
    """The sky the landing zone's feed continues (``kind``, ``harsh``, ``storm``); LookupError without a feed."""
    path = Path(settings.landing) / STATE
    if not path.is_file():
        raise LookupError(f"no sky to continue in {settings.landing} (no {STATE})")
    return str(json.loads(path.read_text())["world"].get("sky", "kind"))


def main(argv: list[str] | None = None) -> int:
    from sda.config.settings import load_settings

    p = argparse.ArgumentParser(prog="python -m sda.sim.feed", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("init", help="take the newest simulation in the landing zone as the sky to continue")
    r = sub.add_parser("run", help="continue the sky until stopped (SIGINT or SIGTERM)")
    r.add_argument("--poll-s", type=float, default=15.0, help="seconds between looks at the clock (default 15)")
    c = sub.add_parser("catch-up", help="observe from where the sky was left up to now; print START END TCA")
    c.add_argument("--max-gap-h", type=float, default=3.0, help="at most this much of the gap observed (default 3)")
    sub.add_parser("sky", help="print the continued sky (kind, harsh, storm: what its sensors report)")
    args = p.parse_args(argv)
    if getattr(args, "poll_s", 1.0) <= 0 or getattr(args, "max_gap_h", 1.0) <= 0:
        p.error("--poll-s and --max-gap-h must be positive")
    settings = load_settings()
    try:
        if args.command == "init":
            state = init(settings)
            print(f"feed: the sky of {state['truth']} continues from {state['observed_until']}")
        elif args.command == "sky":
            print(sky_of(settings))
        elif args.command == "catch-up":
            start, end, tca = catch_up(settings, args.max_gap_h)
            print(iso_utc(start), iso_utc(end), tca)
        else:
            stop: list = []
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.append(True))
            run(settings, args.poll_s, stop)
    except LookupError as exc:
        print(f"feed: {exc}", file=sys.stderr)
        return NOT_RESUMABLE
    except TooOld as exc:
        print(f"feed: {exc}", file=sys.stderr)
        return TOO_OLD
    return 0


if __name__ == "__main__":
    sys.exit(main())
