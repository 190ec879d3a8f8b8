"""Stage ``acquire``: gold ``uncorrelated`` -> new objects under provisional numbers (gold
``provisional_objects``, ``catalog``, ``correlated``).

    python jobs/acquire.py --start ISO --end ISO --run-id ID [--replay]

An object in no catalogue leaves every observation of it in ``uncorrelated``. When new held rows arrive,
this stage searches the held observations of the last ``settings.acquire_lookback_h`` (event time, up to the
newest held row) for new objects (:func:`sda.orbit.acquisition.search.acquire`: tracklets, initial orbit
determination, passes linked by joint fits; confirmed when seen in two passes). Each one found:

* is numbered in the analyst range from its earliest observation (:func:`sda.pipeline.provisional.number_for`:
  the same observations give the same number, whatever the run split);
* enters gold ``catalog`` with an element set fitted to its fused orbit's numerical prediction (``source``
  provisional): from the next stage on, the screening includes it, and from the next run on, correlation
  takes its new observations and the fuse stage refits it as any catalogued object;
* takes its fitted observations out of ``uncorrelated`` into ``correlated`` (``acquired:<run>``), so they
  are counted once.

Each run with new observations (or a new catalogue) also retires the provisional objects nothing has seen
for ``settings.acquire_retire_h`` and merges the ones a catalogued object's element set follows within
``settings.acquire_merge_km`` (their correlated observations move to it); the registry keeps every row
(:mod:`sda.pipeline.provisional`). The search runs on the driver: the pool is what no catalogued object
explains over a day (thousands of rows), and its linking is sequential by nature.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import sys
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from sda.lake import schemas
from sda.lake.orbits import active_catalog, newest_element_sets
from sda.lake.schemas import PROVISIONAL_OBJECTS
from sda.orbit.estimation.measurements import FIT_COLUMNS
from sda.orbit.times import as_utc
from sda.pipeline import changefeed, faults, provisional, runtime, sinks
from sda.pipeline.arguments import stage_parser, with_defaults
from sda.pipeline.manoeuvres import move_held

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from sda.config.settings import Settings

STAGE = "acquire"
HELD, SEEN, CATALOG = "uncorrelated", "correlated", "catalog"


def newest_time(frames: list["DataFrame"]) -> dt.datetime | None:
    """The newest event time among the changes (None: no rows)."""
    values = [f.agg(F.max("event_time")).first()[0] for f in frames]
    values = [as_utc(v) for v in values if v is not None]
    return max(values) if values else None


def search(spark: "SparkSession", settings: "Settings", newest: dt.datetime, reg: list[dict], run_id: str) -> dict:
    """Find the new objects in the pool and write them (module docstring). Returns the run's figures."""
    from sda.orbit import uncertainty
    from sda.orbit.acquisition.search import AcquireSettings, acquire, element_set
    from sda.orbit.estimation import dynamics, registry_sigmas
    from sda.orbit.fusion.arcs import apogee_km
    from sda.orbit.sensors import load_sensors

    obs = provisional.pool(spark, settings, newest, FIT_COLUMNS)
    runtime.progress(STAGE, "%d held observations in the %g h pool", len(obs), settings.acquire_lookback_h)
    base = AcquireSettings()
    config = dataclasses.replace(base.config, light_time=settings.light_time)
    found = acquire(obs, registry_sigmas(load_sensors()), dataclasses.replace(base, config=config))
    taken = {int(r["norad_id"]) for r in reg}
    known = {r["founder"]: int(r["norad_id"]) for r in reg}
    rows, sets, moves, failed = [], [], [], 0
    for obj in found:
        norad = known.get(obj.founder) or provisional.number_for(obj.founder, taken)
        taken.add(norad)
        try:
            lines = element_set(obj, norad)
        except (ValueError, dynamics.PropagationError) as exc:
            runtime.progress(STAGE, "object founded by %s: no element set (%s); left in the pool", obj.founder, exc)
            failed += 1
            continue
        hp, ha = dynamics.perigee_km(obj.result.state), apogee_km(obj.result.state)
        regime = uncertainty.orbit_regime(hp, ha)
        rows.append(provisional.registry_row(norad, obj, regime, obj.result.epoch, run_id))
        sets.append(provisional.catalogue_row(norad, obj.result.epoch, lines, hp, ha, run_id))
        moves += [(i, norad) for i in obj.obs_ids]
    if rows:
        faults.checkpoint("acquire:before-write")
        sinks.upsert(spark, spark.createDataFrame(rows, PROVISIONAL_OBJECTS), "provisional_objects", settings,
                     unique=True)
        sinks.merge_new(spark, spark.createDataFrame(sets, schemas.CATALOG), "catalog", settings, unique=True)
        faults.checkpoint("acquire:after-catalogue")
        lo = newest - dt.timedelta(hours=settings.acquire_lookback_h)
        moved = move_held(spark, settings, spark.createDataFrame(moves, "obs_id string, fitted_norad_id long"),
                          lo, provisional.ACQUIRED)
    else:
        moved = 0
    return {"pool": len(obs), "acquired": len(rows), "acquired_ids": sorted(int(r["norad_id"]) for r in rows),
            "acquired_observations": moved, "no_element_set": failed}


def fused_sets(spark: "SparkSession", settings: "Settings", ids: list[int], since: dt.datetime) -> dict:
    """The provisional objects' newest usable fused screening element sets (the fuse stage keeps them fresh;
    the catalogue's is the acquisition's, which ages)."""
    from sda.lake.orbits import newest_fused_orbits
    from sda.lake.tables import TABLES, table_exists

    if not ids or not table_exists("fused_orbits", settings):
        return {}
    fused = TABLES["fused_orbits"].read(spark, settings).where(F.col("norad_id").isin(ids))
    return {int(r["norad_id"]): (r["line1"], r["line2"])
            for r in newest_fused_orbits(fused, since, "line1", "line2",
                                          min_span_s=settings.fusion_min_span_s).collect()}


def upkeep(spark: "SparkSession", settings: "Settings", newest: dt.datetime | None, reg: list[dict], fresh: set[int],
           run_id: str) -> dict:
    """Retire and merge the active provisional objects (module docstring); refresh their ``last_seen``."""
    active = [r for r in reg if r["status"] == "active" and int(r["norad_id"]) not in fresh]
    if not active:
        return {"retired": 0, "merged": 0}
    ids = sorted(int(r["norad_id"]) for r in active)
    since = min(as_utc(r["first_obs"]) for r in active)
    seen = provisional.last_seen(spark, settings, ids, since)
    # a run with only a catalogue change (no event time to judge by) retires nothing
    retired = provisional.retirements(active, seen, newest, settings.acquire_retire_h, run_id) if newest else []
    left = [{**r, "last_seen": max(as_utc(r["last_seen"]),
                                   as_utc(seen.get(int(r["norad_id"]), r["last_seen"])))}
            for r in active if int(r["norad_id"]) not in {int(x["norad_id"]) for x in retired}]
    newest_sets = {int(r["norad_id"]): (r["line1"], r["line2"]) for r in
                   newest_element_sets(active_catalog(spark, settings), "line1", "line2").collect()}
    newest_sets.update(fused_sets(spark, settings, ids, since))
    distinct = provisional.co_observed(spark, settings, [int(r["norad_id"]) for r in left], since)
    merged = provisional.merges(left, newest_sets, newest_sets, settings.acquire_merge_km, run_id, distinct)
    gone = {int(x["norad_id"]) for x in retired + merged}
    before = {int(r["norad_id"]): as_utc(r["last_seen"]) for r in active}
    refreshed = [{**r, "run_id": run_id} for r in left
                 if int(r["norad_id"]) not in gone and as_utc(r["last_seen"]) > before[int(r["norad_id"])]]
    changed = retired + merged + refreshed
    if changed:
        sinks.upsert(spark, spark.createDataFrame([tuple(r[f] for f in provisional.FIELDS) for r in changed],
                                                  PROVISIONAL_OBJECTS), "provisional_objects", settings, unique=True)
    moved = provisional.relabel(spark, settings, [(int(r["norad_id"]), int(r["merged_into"])) for r in merged], since)
    return {"retired": len(retired), "merged": len(merged), "merged_observations": moved,
            "retired_ids": sorted(int(r["norad_id"]) for r in retired),
            "merged_ids": {int(r["norad_id"]): int(r["merged_into"]) for r in merged}}


def run(spark: "SparkSession", settings: "Settings", args: argparse.Namespace) -> dict[str, Any]:
    args = with_defaults(args, parser())
    held, _, first_h, last_h = changefeed.net_changes_for(spark, STAGE, HELD, settings, args)
    seen, _, first_c, last_c = changefeed.net_changes_for(spark, STAGE, SEEN, settings, args)
    _, _, first_k, last_k = changefeed.net_changes_for(spark, STAGE, CATALOG, settings, args)
    consumed = {HELD: last_h, SEEN: last_c, CATALOG: last_k}
    metrics: dict[str, Any] = {"versions": [last_h, last_c, last_k], "records_in": 0, "records_out": 0,
                               "quarantined": 0, "duplicates": 0, "acquired": 0, "retired": 0, "merged": 0}
    if first_h > last_h and first_c > last_c and first_k > last_k:
        return metrics
    newest = newest_time(([held] if first_h <= last_h else []) + ([seen] if first_c <= last_c else []))
    reg = provisional.registry(spark, settings)
    found = search(spark, settings, newest, reg, args.run_id) if newest is not None and first_h <= last_h else {}
    done = upkeep(spark, settings, newest, reg, set(found.get("acquired_ids", [])), args.run_id)
    n = found.get("pool", 0)
    return {**metrics, **found, **done, "records_in": n, "records_out": n, "consumed": consumed}


def parser() -> argparse.ArgumentParser:
    return stage_parser(STAGE, "Find objects in no catalogue among the uncorrelated observations.")


def main(argv: list[str] | None = None, settings: "Settings | None" = None,
         spark: "SparkSession | None" = None) -> dict[str, Any]:
    return runtime.run_stage(STAGE, argv, run, parser(), settings=settings, spark=spark)


if __name__ == "__main__":
    main(sys.argv[1:])
