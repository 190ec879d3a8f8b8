"""What ``bench/latency.py`` lands in a sample: sensor files and a conjunction pair.

* the pair: the simulator's designer, renumbered to NORAD 99801+2i / 99802+2i (:func:`design_pair`), appended
  to the catalogue file in one ``os.replace`` (:func:`replace_catalog`); the files moved into the landing
  zone at ``t0`` (:func:`land`); :func:`prepare_sample` stages both.
* ``--warm-up short``: 5 simulated minutes of a generated catalogue to warm up, and 3 minutes of it, a new
  simulation each (:func:`simulate_into`), per sample: nothing is fused (no fit spans 90 minutes).

``--warm-up scenario`` (the default): the latency measured where the fused orbits are in use, at ``make
run``'s scale and in its sky:

* :func:`warm_sky`: ``make run``'s first simulation (:mod:`sda.sim.scenario`'s window of three hours or more
  ending on a chunk boundary, so that its first run fuses the objects over several passes and the screening
  uses them; the harsher sky, element sets 0.5-3 days old, radar frames every 20 s, the injected pair), and
  the feed that continues it (:mod:`sda.sim.feed` ``init``);
* :func:`wait_for_chunk`: a sample waits for the next whole 5-minute chunk of the sky to pass (the simulator's
  files are per chunk): samples are at least 5 minutes apart, as ``make run``'s sensors deliver;
* :func:`observe_chunk`: the chunks passed since the last sample, observed on the *continued* true orbits (the
  objects the fused orbits were fitted to, never a new sky), written to the feed's pending directory, from
  which the sample lands them all at ``t0``.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from latency_stack import UTC, BenchError, Progress, iso, say

FIRST_PAIR_ID = 99801  # pair i: 99801 + 2i / 99802 + 2i; 99901/99902 belong to the simulator
MAX_FILES = (99899 - FIRST_PAIR_ID) // 2  # the last pair stays below the simulator's 99901
WARMUP_MINUTES = 5.0
SAMPLE_MINUTES = 3.0
MISS_M = 150.0
TCA_AHEAD = dt.timedelta(hours=2)

if TYPE_CHECKING:
    from latency_measure import Lake

HOURS = 3.0  # make run's SIM_HOURS
MIN_FIT_HOURS = 2.0
TCA_HOURS = 3.0
RADAR_CADENCE_S = 20.0  # make run's SIM_RADAR_CADENCE_S


def warm_sky(landing: Path, catalog_out: Path):
    """The warm-up's files in ``landing`` (module docstring); the simulation's result."""
    from sda.config.settings import load_settings
    from sda.sim import feed
    from sda.sim.scenario import window_start
    from sda.sim.simulate import SimConfig, simulate

    settings = load_settings()
    end = feed.floor_chunk(dt.datetime.now(UTC))
    start = window_start(end, settings.fusion_arc_h, HOURS, MIN_FIT_HOURS)
    sim = simulate(SimConfig(start=start, end=end, landing=landing, catalog_out=catalog_out, seed=1,
                             inject_conjunction=True, tca=end + dt.timedelta(hours=TCA_HOURS),
                             tle_age_days=(0.5, 3.0), radar_cadence_s=RADAR_CADENCE_S, sky="harsh"))
    feed.init(settings)
    say(f"warm-up sky: {start.isoformat()} .. {end.isoformat()} (make run's scenario, harsher sky), continued by "
        "the feed")
    return sim


def wait_for_chunk(progress: Progress, poll_s: float = 2.0) -> None:
    """Until a whole chunk has passed since the feed's sky was last observed."""
    from sda.config.settings import load_settings
    from sda.sim import feed

    observed = feed.Feed.load(load_settings()).observed_until
    while feed.floor_chunk(dt.datetime.now(UTC)) <= observed:
        progress.tick()
        time.sleep(poll_s)


def observe_chunk() -> tuple[Path, list[str], int, tuple[float, float]]:
    """The chunks passed since the last observation, observed into the feed's pending directory: (that
    directory, the files relative to it, their lines, the events' span as unix seconds)."""
    from sda.config.settings import load_settings
    from sda.sim import feed

    settings = load_settings()
    sky = feed.Feed.load(settings)
    start, end = sky.observed_until, feed.floor_chunk(dt.datetime.now(UTC))
    pending = Path(settings.landing) / feed.PENDING
    sky.observe(start, end, hold=True)
    files = sorted(p.relative_to(pending).as_posix() for p in pending.rglob("*") if p.is_file())
    lines = sum(len((pending / f).read_bytes().splitlines()) for f in files)
    return pending, files, lines, (start.timestamp(), end.timestamp())


# --- data ----------------------------------------------------------------------------------------

def tle_checksum(line68: str) -> int:
    return sum(int(c) if c.isdigit() else (1 if c == "-" else 0) for c in line68[:68]) % 10


def renumber(line: str, norad_id: int) -> str:
    """A TLE line with another catalogue number (columns 3-7) and its checksum (column 69) redone."""
    if not 10000 <= norad_id <= 99999:
        raise ValueError(f"NORAD id {norad_id} does not fit a 5-digit TLE field")
    body = (line[:2] + f"{norad_id:05d}" + line[7:68]).ljust(68)
    return body + str(tle_checksum(body))


def design_pair(index: int, tca: dt.datetime) -> dict:
    """A conjunction pair for sample ``index``: the simulator's designer, renumbered, checked."""
    from sgp4.api import WGS72, Satrec

    from sda.sim.conjunction import closest_approach, design_conjunction

    primary, secondary = FIRST_PAIR_ID + 2 * index, FIRST_PAIR_ID + 2 * index + 1
    designed = design_conjunction(tca, MISS_M, seed=1000 + index)
    lines, sats = [], []
    for (_, l1, l2), norad_id, role in zip(designed["tle"], (primary, secondary), ("PRIMARY", "SECONDARY")):
        n1, n2 = renumber(l1, norad_id), renumber(l2, norad_id)
        sat = Satrec.twoline2rv(n1, n2, WGS72)
        if sat.satnum != norad_id or sat.error:
            raise BenchError(f"renumbered TLE for {norad_id} does not read back "
                             f"(satnum {sat.satnum}, error {sat.error})")
        lines += [f"BENCH-{index:02d}-{role}", n1, n2]
        sats.append(sat)
    t_ca, miss_m = closest_approach(sats[0], sats[1], tca.timestamp())
    return {"primary_id": primary, "secondary_id": secondary, "designed_tca": iso(tca.timestamp()),
            "achieved_tca": iso(t_ca), "achieved_miss_m": round(miss_m, 1), "text": "\n".join(lines) + "\n"}


def simulate_into(directory: Path, start: dt.datetime, end: dt.datetime, seed: int, catalog: Path | None,
                  catalog_out: Path | None = None):
    from sda.sim.simulate import SimConfig, simulate

    return simulate(SimConfig(start=start, end=end, landing=directory, catalog=catalog, catalog_out=catalog_out,
                              seed=seed))


def land(staging: Path, files: list[str], landing: Path, subdir: str, t0: float) -> list[str]:
    """Move the staged sensor files into ``<landing>/<kind>/<subdir>/`` with mtime ``t0``: one
    ``os.replace`` each, so ingest sees a whole file or none."""
    landed = []
    for rel in files:
        kind, name = rel.split("/", 1)
        src, dst = staging / rel, landing / kind / subdir / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.utime(src, (t0, t0))
        os.replace(src, dst)
        landed.append(f"{kind}/{subdir}/{name}")
    return landed


def replace_catalog(catalog: Path, extra: str) -> None:
    text = catalog.read_text()
    if text and not text.endswith("\n"):
        text += "\n"
    tmp = catalog.with_name(f".{catalog.name}.bench.tmp")
    tmp.write_text(text + extra)
    os.replace(tmp, catalog)


# --- a sample ---------------------------------------------------------------------------------------------

def prepare_sample(index: int, lake: Lake, dirs: dict[str, Path], warm_up_kind: str) -> dict[str, Any]:
    """Before ``t0`` (not timed): the sample's sensor files staged (a short simulation of the base catalogue, or
    the feed's next chunks: the feed's: ``--warm-up scenario``), its pair designed, its landing directories made and the
    tails moved past every commit so far."""
    if warm_up_kind == "scenario":
        staging, files, records, span = observe_chunk()
    else:
        now = dt.datetime.now(UTC).replace(microsecond=0)
        staging = dirs["staging"] / f"bench-{index:02d}"
        shutil.rmtree(staging, ignore_errors=True)
        sim = simulate_into(staging, now - dt.timedelta(minutes=SAMPLE_MINUTES), now, seed=100 + index,
                            catalog=dirs["base_catalog"])
        files, records = sim.files, sum(sum(c.values()) for c in sim.counts.values())
        span = (now.timestamp() - SAMPLE_MINUTES * 60, now.timestamp())
    subdir = f"bench-{index:02d}"
    for kind in {rel.split("/", 1)[0] for rel in files}:
        (dirs["landing"] / kind / subdir).mkdir(parents=True, exist_ok=True)
    for tail in (lake.silver, lake.alerts):
        tail.skip_existing()  # earlier commits cannot hold this sample's rows
    lake.poll_bookkeeping()
    pair = design_pair(index, dt.datetime.now(UTC).replace(microsecond=0) + TCA_AHEAD)
    return {"staging": staging, "files": files, "records": records, "span": span, "pair": pair, "subdir": subdir}
