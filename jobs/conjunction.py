"""Stage ``conjunction``: gold ``catalog`` -> gold ``conjunctions``, ``alerts`` and the outbox.

    python jobs/conjunction.py --start ISO --end ISO --run-id ID [--screen-start ISO] [--horizon-h H]

Screens the newest element set of every object over ``[screen_start, screen_start + horizon)``
(default: from ``--end`` for ``settings.screening_horizon_h``) for approaches closer than
``settings.screening_threshold_km``, with the filter chain of :mod:`sda.screening` (the module
docstring argues why no approach under the threshold is lost):

(a) altitude bands -- counted on the driver, applied as a pair predicate inside (b);
(b) the spatial grid, keyed by time step across Spark: the grid steps are cut into blocks, one task
    per block; a task propagates the whole catalogue over its steps with ``SatrecArray`` (so the
    blocks share the propagation work out, no object-step is computed twice) and, per step, joins
    positions to cubic cells of edge ``threshold + Vmax * step`` by sorting the cell keys (same and
    neighbouring cells, each pair once); (b') the straight-line + curvature bound per (pair, step);
(c) refinement, keyed by pair: the candidate (pair, step)s are grouped per pair (a shuffle) and each
    pair's windows refined (``mapInPandas``): TCA from the range-rate root, miss distance, relative
    speed, RTN and both states at TCA.

Objects SGP4 refuses at some time of the horizon (its error codes) are skipped from that step on and
listed in ``ops.propagation_errors``; they never stop the run.

Then :func:`sda.alerts.publish`: Pc for every event (Foster 2D with the covariance of
:mod:`sda.uncertainty`), ``conjunctions`` upserted on event_id = sha256(primary, secondary, TCA to
the minute), the alert lifecycle (new / updated / closed) in ``alerts`` and ``alert_events``, and one
CCSDS CDM (KVN) plus a JSON twin per change in ``settings.outbox``, written once.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import functions as F, types as T

from sda import alerts, runtime, schemas, screening
from sda import replay as replay_plan
from sda.tables import TABLES

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from sda.settings import Settings

STAGE = "conjunction"
MIN_STEPS_PER_BLOCK = 60  # a task screens a block of grid steps: at least this many (one SatrecArray build each)
BLOCKS_PER_CORE = 3  # a few blocks per core even out the tasks (LEO-crowded steps cost more)

CANDIDATES = T.StructType(
    [
        # pair: a (pair, step) passing (a)+(b)+(b'); count: a block's (a)+(b) pair-steps in `count`;
        # error: an object SGP4 refused from `step` on, its error code in `count`
        T.StructField("kind", T.StringType(), False),
        T.StructField("primary_id", T.LongType(), False),
        T.StructField("secondary_id", T.LongType(), False),
        T.StructField("step", T.LongType(), False),
        T.StructField("count", T.LongType(), False),
    ]
)
APPROACHES = T.StructType(
    [T.StructField(name, T.LongType() if kind == "int64" else T.DoubleType(), False)
     for name, kind in screening.APPROACH_COLUMNS.items()]
)


def screening_catalogue(catalog: "DataFrame") -> "DataFrame":
    """Newest element set per object."""
    newest = F.max_by(F.struct("line1", "line2", "perigee_km", "apogee_km", "epoch"), "epoch")
    return catalog.groupBy("norad_id").agg(newest.alias("e")).select(
        "norad_id", "e.line1", "e.line2", "e.perigee_km", "e.apogee_km", "e.epoch"
    )


def step_blocks(n_steps: int, cores: int) -> list[tuple[int, int]]:
    """[first, end) step ranges: about BLOCKS_PER_CORE per core, none under MIN_STEPS_PER_BLOCK."""
    count = max(1, min(cores * BLOCKS_PER_CORE, n_steps // MIN_STEPS_PER_BLOCK))
    edges = np.linspace(0, n_steps, count + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def candidates(spark: "SparkSession", catalogue: "screening.CatalogueLines", times: np.ndarray, threshold_km: float,
               step_s: float, cores: int) -> "DataFrame":
    """(a)+(b)+(b') keyed by time step across Spark: one task per block of grid steps propagates the
    whole catalogue over its steps (``SatrecArray``) and joins positions to cells within each step
    (:func:`sda.screening.block_candidates`). Blocks partition the propagation work, so the grid adds
    no propagation to the floor's; the catalogue's element sets travel in the function's closure
    (a few MB for a 13,000-object catalogue), which Spark Connect ships with the plan."""
    times = np.asarray(times, dtype=float)
    blocks = step_blocks(len(times), cores)

    def screen_blocks(batches):
        objects, arr = screening.worker_objects(catalogue)
        for pdf in batches:
            for block_id in pdf["id"]:
                lo, hi = blocks[int(block_id)]
                res = screening.block_candidates(objects, times[lo:hi], lo, threshold_km, step_s, arr)
                errors = sorted(res.errors.items())
                yield pd.DataFrame({
                    "kind": ["pair"] * len(res.step) + ["count"] + ["error"] * len(errors),
                    "primary_id": np.concatenate([res.primary_id, [-1], [k for k, _ in errors]]).astype(np.int64),
                    "secondary_id": np.concatenate([res.secondary_id, [-1], [-1] * len(errors)]).astype(np.int64),
                    "step": np.concatenate([res.step, [lo], [st for _, (st, _) in errors]]).astype(np.int64),
                    "count": np.concatenate([np.zeros(len(res.step)), [res.pair_steps_grid],
                                             [code for _, (_, code) in errors]]).astype(np.int64),
                })

    return spark.range(0, len(blocks), 1, len(blocks)).mapInPandas(screen_blocks, schema=CANDIDATES)


def refine(pairs: "DataFrame", catalogue: "screening.CatalogueLines", grid_start: float, step_s: float,
           start: float, end: float, threshold_km: float) -> "DataFrame":
    """(c) closest approaches of the candidate pairs (primary_id, secondary_id, steps), keyed by pair."""
    def refine_partition(batches):
        objects, _ = screening.worker_objects(catalogue)
        by_id = dict(zip(objects.norad_ids.tolist(), objects.satrecs))
        for pdf in batches:
            yield screening.refine_pairs(pdf, by_id, grid_start, step_s, start, end, threshold_km)

    return pairs.mapInPandas(refine_partition, schema=APPROACHES)


def screen(spark: "SparkSession", catalogue: "screening.CatalogueLines", start: float, end: float,
           threshold_km: float, step_s: float, partitions: int) -> tuple[pd.DataFrame, dict[str, Any], list[tuple[int, int, int]]]:
    """The whole chain on Spark: (events, filter metrics, SGP4 failures as (norad_id, step, code))."""
    objects, _ = screening.worker_objects(catalogue)
    times = screening.time_grid(start, end, step_s)
    grids = objects.grids(threshold_km, step_s)
    n = len(objects.norad_ids)
    metrics: dict[str, Any] = {
        "steps": len(times),
        "cell_km": round(grids.slow_cell_km, 1),
        "cell_fast_km": round(grids.fast_cell_km, 1),
        "fast_objects": int((~grids.slow).sum()),
        "objects": n,
        "pairs_all": n * (n - 1) // 2,
        "pairs_altitude": screening.altitude_band_pair_count(objects.perigee_km, objects.apogee_km, threshold_km),
    }
    events = pd.DataFrame({c: pd.Series(dtype=t) for c, t in screening.APPROACH_COLUMNS.items()})
    if n < 2:
        metrics.update({"pair_steps_grid": 0, "pair_steps_linear": 0, "pairs_linear": 0})
        return events, metrics, []
    cands = candidates(spark, catalogue, times, threshold_km, step_s, partitions).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        side = cands.where(F.col("kind") != "pair").collect()
        metrics["pair_steps_grid"] = int(sum(r["count"] for r in side if r["kind"] == "count"))
        first_error: dict[int, tuple[int, int]] = {}
        for r in side:
            if r["kind"] == "error" and (r["primary_id"] not in first_error or r["step"] < first_error[r["primary_id"]][0]):
                first_error[r["primary_id"]] = (int(r["step"]), int(r["count"]))
        pairs = cands.where(F.col("kind") == "pair")
        if first_error:  # an object is unusable from its first failure on (SGP4 may "recover" later)
            failed = F.create_map(*[F.lit(x) for norad, (step, _) in sorted(first_error.items()) for x in (norad, step)])
            never = F.lit(np.iinfo(np.int64).max)
            pairs = pairs.where((F.col("step") < F.coalesce(failed[F.col("primary_id")], never))
                                & (F.col("step") < F.coalesce(failed[F.col("secondary_id")], never)))
        per_pair = (
            pairs
            .groupBy("primary_id", "secondary_id")
            .agg(F.sort_array(F.collect_list("step")).alias("steps"))
            .repartition(partitions)
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        summary = per_pair.agg(F.count(F.lit(1)).alias("pairs"), F.coalesce(F.sum(F.size("steps")), F.lit(0)).alias("steps")).first()
        metrics.update({"pairs_linear": int(summary["pairs"]), "pair_steps_linear": int(summary["steps"])})
        events = refine(per_pair, catalogue, start, step_s, start, end, threshold_km).toPandas()
        per_pair.unpersist()
    finally:
        cands.unpersist()
    errors = [(norad, step, code) for norad, (step, code) in sorted(first_error.items())]
    return events, metrics, errors


def run(spark: "SparkSession", settings: "Settings", args: argparse.Namespace) -> dict[str, Any]:
    args = _validate(args)
    if getattr(args, "replay", False):
        return replay(spark, settings, args)
    return screen_once(spark, settings, args, args.screen_start or args.end, lifecycle=True)


def replay(spark: "SparkSession", settings: "Settings", args: argparse.Namespace) -> dict[str, Any]:
    """Redo the range's screenings into ``gold.conjunctions``. The alert lifecycle is not replayed:
    alerts already left through the outbox, and re-judging them from a past screening would move the
    present state backwards."""
    starts = ([args.screen_start] if args.screen_start else
              replay_plan.screening_starts(args.start, args.end, settings.cadence_minutes))
    metrics: dict[str, Any] = {"screenings": [s.isoformat() for s in starts], "events": 0, "red": 0, "yellow": 0,
                               "records_in": 0, "records_out": 0, "quarantined": 0, "duplicates": 0}
    for i, screen_start in enumerate(starts):
        runtime.progress(STAGE, "replay screening %d of %d from %s", i + 1, len(starts), screen_start.isoformat())
        one = screen_once(spark, settings, args, screen_start, lifecycle=False)
        for key in ("events", "red", "yellow", "records_in", "records_out", "quarantined", "duplicates"):
            metrics[key] += one.get(key, 0)
    return metrics


def screen_once(spark: "SparkSession", settings: "Settings", args: argparse.Namespace, screen_start: dt.datetime,
                lifecycle: bool) -> dict[str, Any]:
    horizon_h = args.horizon_h or settings.screening_horizon_h
    start = screen_start.timestamp()
    end = start + horizon_h * 3600.0
    threshold_km, step_s = settings.screening_threshold_km, settings.screening_step_s

    catalogue_rows = screening_catalogue(TABLES["catalog"].read(spark, settings)).orderBy("norad_id").collect()
    catalogue = screening.CatalogueLines(tuple(int(r["norad_id"]) for r in catalogue_rows),
                                         tuple(r["line1"] for r in catalogue_rows), tuple(r["line2"] for r in catalogue_rows))
    epochs = {int(r["norad_id"]): r["epoch"] for r in catalogue_rows}
    runtime.progress(STAGE, "screening %d objects over %s h from %s", len(catalogue_rows), horizon_h, screen_start.isoformat())
    events, screened, errors = screen(spark, catalogue, start, end, threshold_km, step_s, settings.shuffle_partitions)
    runtime.progress(STAGE, "screened: %d approaches under %s km", len(events), threshold_km)
    metrics: dict[str, Any] = {"screen_start": screen_start.isoformat(), "horizon_h": horizon_h, **screened,
                               "sgp4_errors": len(errors)}
    if errors:
        write_propagation_errors(spark, settings, errors, start, step_s, epochs, args.run_id)

    screen_end = screen_start + dt.timedelta(hours=horizon_h)
    metrics.update(alerts.publish(spark, settings, events, screen_start, args.run_id, screen_end=screen_end,
                                  lifecycle=lifecycle))
    # conservation over the catalogue objects: every object is screened, or screened until SGP4
    # refused it (those are counted as quarantined and listed in ops.propagation_errors)
    n = len(catalogue.norad_ids)
    metrics.update({"records_in": n, "records_out": n - len(errors), "quarantined": len(errors), "duplicates": 0})
    return metrics


def write_propagation_errors(spark: "SparkSession", settings: "Settings", errors: list[tuple[int, int, int]],
                             grid_start: float, step_s: float, epochs: dict[int, Any], run_id: str) -> None:
    from sda.catalog import sgp4_error_meaning

    rows = [(STAGE, run_id, int(norad), int(code), sgp4_error_meaning(code),
             dt.datetime.fromtimestamp(grid_start + step * step_s, tz=dt.timezone.utc), epochs.get(int(norad)))
            for norad, step, code in errors]
    runtime.upsert(spark, spark.createDataFrame(rows, schemas.PROPAGATION_ERRORS), "propagation_errors", settings)


def parser() -> argparse.ArgumentParser:
    p = runtime.stage_parser(STAGE, "Screen the catalogue for close approaches and raise alerts.")
    p.add_argument("--screen-start", default=None, help="start of the screening interval (ISO-8601); default --end")
    p.add_argument("--horizon-h", type=float, default=None, help="screening horizon in hours; default settings")
    return p


def _validate(args: argparse.Namespace) -> argparse.Namespace:
    args.screen_start = getattr(args, "screen_start", None)
    args.horizon_h = getattr(args, "horizon_h", None)
    if args.screen_start is not None and not isinstance(args.screen_start, dt.datetime):
        args.screen_start = runtime.parse_instant("screen-start", args.screen_start)
    if args.horizon_h is not None and not (0 < args.horizon_h <= 24 * 14):
        raise runtime.StageArgumentError(f"--horizon-h {args.horizon_h}: expected hours in (0, 336]")
    return args


def main(argv: list[str] | None = None, settings: "Settings | None" = None, spark: "SparkSession | None" = None) -> dict[str, Any]:
    return runtime.run_stage(STAGE, argv, run, parser(), settings=settings, spark=spark)


if __name__ == "__main__":
    main(sys.argv[1:])
