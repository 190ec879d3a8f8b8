"""Stage ``conjunction``: gold ``catalog`` -> gold ``conjunctions``, ``alerts`` and the outbox.

    python jobs/conjunction.py --start ISO --end ISO --run-id ID [--screen-start ISO] [--horizon-h H]
                               [--full-screening]

Screens the newest element set of every object over ``[screen_start, screen_start + horizon)``
(default: from ``--end`` for ``settings.screening_horizon_h``) for approaches closer than
``settings.screening_threshold_km``, with the filter chain of :mod:`sda.orbit.screening` (the module
docstring argues why no approach under the threshold is lost):

(a) altitude bands -- counted on the driver, applied as a pair predicate inside (b);
(b) the spatial grid, keyed by time step across Spark: the grid steps are cut into blocks, one task
    per block; a task propagates the whole catalogue over its steps with ``SatrecArray`` (so the
    blocks share the propagation work out, no object-step is computed twice) and, per step, joins
    positions to cubic cells of edge ``threshold + Vmax * step`` by sorting the cell keys (same and
    neighbouring cells, each pair once); (b') the straight-line + curvature bound per (pair, step);
(c) refinement, keyed by pair: the candidate (pair, step)s are grouped per pair (a shuffle) and each
    pair's windows refined (``mapInPandas``): TCA from the range-rate root, miss distance, relative
    speed, RTN and both states at TCA. A pair within the threshold for a step at an edge of the
    horizon is worked out whole: a persistent proximity (closest at an edge, or within the threshold
    all along) is one event per pair, flagged (:func:`sda.orbit.screening.pair_events`).

**Incremental.** A scheduled or manual run screens only what changed since the screening recorded in
``ops.screening_state`` (per object: the element-set epoch screened; the horizon, threshold, step and
code version) and ``ops.screening_events`` (its open events), as :func:`sda.orbit.screening.plan_increment`
plans it: the newly opened slice of the horizon all against all; the objects whose element set
changed against all over the rest of the horizon (on a coarser grid with a second-order bound,
:func:`sda.orbit.screening.focus_block_candidates`); the pairs whose events passed and the persistent pairs
rechecked on the driver. Events of unchanged pairs are kept, those whose TCA passed drop out. A new
threshold, step or screening code, a start before the recorded one, a gap past the recorded horizon
or ``--full-screening`` make it a full screening -- except a start less than one cadence before the
recorded one (a scheduled run queued behind a later manual run, as ``make run`` makes): the horizon
does not move back, the run continues from the recorded start. A replay screens in full and leaves
the state alone.

Objects SGP4 refuses at some time of the horizon (its error codes) are skipped from that step on and
listed in ``ops.propagation_errors``; they never stop the run.

Then :func:`sda.alerts.publish.publish`: Pc for the new events and for kept events whose objects' state
(gold ``object_state``) changed (Foster 2D with the covariance of :mod:`sda.orbit.uncertainty`),
``conjunctions`` upserted on event_id = sha256(primary, secondary, TCA to the minute) -- or of the pair
alone for a persistent proximity --, the alert lifecycle (new / updated / closed) in ``alerts`` and
``alert_events``, and one CCSDS CDM (KVN) plus a JSON twin per change in ``settings.outbox``,
written once; an object with a manoeuvre in gold ``manoeuvres`` burnt by the screening start is
MANEUVERABLE = YES in its CDMs. The screening state is recorded last.

Before the screening (not in a replay), :func:`sda.alerts.publish.publish_manoeuvres` writes one CCSDS OPM
(KVN) plus a JSON twin per gold ``manoeuvres`` row not yet in the outbox (the post-burn orbit and the burn),
written once, and a withdrawal (JSON) of each published manoeuvre that a re-fit of its window no longer finds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sda.alerts.fused import FUSED_COLUMNS
from sda.alerts.publish import publish, publish_manoeuvres
from sda.alerts.screening_record import newest_states, read_state, write_state
from sda.alerts.values import aware
from sda.lake import schemas
from sda.lake.orbits import active_catalog, newest_element_sets, usable_fused, with_fused_lines
from sda.lake.spark import observed, task_slots
from sda.orbit import screening
from sda.pipeline import latency, runtime, sinks
from sda.pipeline import replay as replay_plan
from sda.pipeline.arguments import StageArgumentError, parse_instant, stage_parser, with_defaults

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from sda.config.settings import Settings

STAGE = "conjunction"
REFINE_ROWS_PER_TASK = 20_000  # candidate (pair, step)s: fewer are refined in one task per slot

CANDIDATES = T.StructType(  # a block's rows: sda.orbit.screening.blocks
    [T.StructField("kind", T.StringType(), False)]
    + [T.StructField(name, T.LongType(), False) for name in screening.BLOCK_COLUMNS[1:]]
)
APPROACHES = T.StructType(
    [T.StructField(name, T.LongType() if kind == "int64" else T.DoubleType(), False)
     for name, kind in screening.APPROACH_COLUMNS.items()]
    + [T.StructField("flag", T.StringType()), T.StructField("exact", T.BooleanType(), False)]
)


# what the screening reads of each object's newest element set (sda.lake.orbits.newest_element_sets)
SCREENED_COLUMNS = ("line1", "line2", "perigee_km", "apogee_km", "epoch")
# what it reads of each usable fused orbit besides the assessment's FUSED_COLUMNS: the renewal rule's, the state's
FUSED_READ = ("epoch", "lines_max_m")


def candidates(spark: "SparkSession", catalogue: "screening.CatalogueLines", parts: list["screening.Part"],
               threshold_km: float, cores: int, ephemeris_dir: str | None = None, every_s: float = 0.0,
               slots: int | None = None, keep_from: float | None = None) -> "DataFrame":
    """(a)+(b)+(b') keyed by time step across Spark: one task per block of grid steps of a part
    propagates the whole catalogue over its steps (``SatrecArray``) and joins positions to cells within
    each step (:func:`sda.orbit.screening.block_candidates`; a focus part, the objects whose element set
    changed against all: :func:`sda.orbit.screening.focus_block_candidates`). Blocks partition the
    propagation work, so the grid adds no propagation to the floor's; the catalogue's element sets
    travel in the function's closure (a few MB for a 13,000-object catalogue), which Spark Connect
    ships with the plan. Under ``ephemeris_dir`` (on the executors' disk) the states at multiples of
    ``every_s`` are stored and read back by focus parts (:class:`sda.orbit.screening.Ephemeris`); those
    before ``keep_from`` (the first time a later screening's focus grid can need) are removed. A
    focus part's steps cost alike (its objects are everywhere at every step): it is cut into one block
    per task slot (``slots``, default ``cores``), as each Python task costs ~0.1 s of its own."""
    grids = [screening.time_grid(p.start, p.end, p.step_s) for p in parts]
    blocks = [(k, lo, hi) for k, times in enumerate(grids) for lo, hi in (
        screening.step_blocks(len(times), slots or cores, 1) if parts[k].focus else
        screening.step_blocks(len(times), cores))]

    def screen_blocks(batches):
        objects, arr = screening.worker_objects(catalogue)
        ephemeris = screening.worker_ephemeris(ephemeris_dir, every_s, objects)
        if ephemeris is not None and keep_from is not None:
            ephemeris.prune(before=keep_from)
        for pdf in batches:
            for block_id in pdf["id"]:
                k, lo, hi = blocks[int(block_id)]
                read = ephemeris.hits if ephemeris is not None else 0
                res = screening.screen_block(objects, parts[k], grids[k][lo:hi], lo, threshold_km, arr, ephemeris)
                yield screening.block_frame(res, k, lo, (ephemeris.hits if ephemeris is not None else 0) - read)

    # an increment (a focus block per slot, then a slice block) runs as one task per slot, the slice
    # with the last focus block: a task of its own would cost more than it screens
    blocks.sort(key=lambda b: parts[b[0]].focus is None)
    tasks = slots if slots and any(p.focus for p in parts) and len(blocks) <= slots + 1 else len(blocks)
    return spark.range(0, len(blocks), 1, tasks).mapInPandas(screen_blocks, schema=CANDIDATES)


def refine(pairs: "DataFrame", catalogue: "screening.CatalogueLines", parts: list["screening.Part"], step_s: float,
           start: float, end: float, threshold_km: float) -> "DataFrame":
    """(c) closest approaches of the candidate pairs (primary_id, secondary_id, steps), keyed by pair;
    pairs at the edges of [start, end) within the threshold there are worked out whole (persistent
    proximity, :func:`sda.orbit.screening.refine_pairs`)."""
    def refine_partition(batches):
        objects, _ = screening.worker_objects(catalogue)
        by_id = dict(zip(objects.norad_ids.tolist(), objects.satrecs))
        for pdf in batches:
            yield screening.refine_pairs(pdf, by_id, start, step_s, start, end, threshold_km, parts)

    return pairs.mapInPandas(refine_partition, schema=APPROACHES)


def _code_time(parts: list["screening.Part"]):
    """Spark column: the time of a candidate's (part, step) code."""
    part = F.shiftright(F.col("step"), screening.PART_SHIFT)
    step = F.col("step").bitwiseAND(F.lit((1 << screening.PART_SHIFT) - 1))
    expr = None
    for k, p in enumerate(parts):
        t = F.lit(p.start) + step.cast("double") * F.lit(p.step_s)
        expr = F.when(part == k, t) if expr is None else expr.when(part == k, t)
    return expr


def screen_parts(spark: "SparkSession", catalogue: "screening.CatalogueLines", parts: list["screening.Part"],
                 start: float, end: float, threshold_km: float, step_s: float, partitions: int,
                 ephemeris_dir: str | None = None) -> tuple[pd.DataFrame, dict[str, Any], list[tuple[int, float, int]]]:
    """The chain on Spark over the plan's parts: (refine_pairs rows, filter metrics, SGP4 failures as
    (norad_id, first failing time, code))."""
    objects, _ = screening.worker_objects(catalogue)
    metrics: dict[str, Any] = {"steps": int(sum(len(screening.time_grid(p.start, p.end, p.step_s)) for p in parts))}
    found = screening.approach_frame([])
    if len(objects.norad_ids) < 2 or not parts:
        metrics.update({"pair_steps_grid": 0, "pair_steps_linear": 0, "pairs_linear": 0})
        return found, metrics, []
    slots = task_slots(spark, partitions)
    cands = candidates(spark, catalogue, parts, threshold_km, partitions, ephemeris_dir,
                       step_s * screening.FOCUS_STEP_FACTOR, slots, screening.focus_grid_start(start, step_s)
                       ).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        side = screening.summarise(cands.where(F.col("kind") != "pair").collect(), parts)
        first_error = side.first_error
        metrics.update({"pair_steps_grid": side.pair_steps_grid, "ephemeris_states_read": side.ephemeris_read})
        pairs = cands.where(F.col("kind") == "pair")
        if first_error:  # an object is unusable from its first failure on (SGP4 may "recover" later)
            failed = F.create_map(*[F.lit(x) for norad, (t, _) in sorted(first_error.items())
                                    for x in (norad, float(t))])
            never = F.lit(float("inf"))
            t = _code_time(parts)
            pairs = pairs.where((t < F.coalesce(failed[F.col("primary_id")], never))
                                & (t < F.coalesce(failed[F.col("secondary_id")], never)))
        linear = Observation("linear")  # counted as the refinement reads the pairs: no job of its own
        grouped = pairs.groupBy("primary_id", "secondary_id").agg(F.sort_array(F.collect_list("step")).alias("steps"))
        counts = (F.count(F.lit(1)).alias("pairs"), F.coalesce(F.sum(F.size("steps")), F.lit(0)).alias("steps"))
        per_pair = grouped.observe(linear, *counts).repartition(
            min(partitions, max(slots, -(-side.candidate_rows // REFINE_ROWS_PER_TASK))))
        found = refine(per_pair, catalogue, parts, step_s, start, end, threshold_km).toPandas()
        got = observed(linear, grouped, *counts)
        metrics.update({"pairs_linear": int(got["pairs"]), "pair_steps_linear": int(got["steps"])})
    finally:
        cands.unpersist()
    found = found.astype({**screening.APPROACH_COLUMNS, "exact": bool})
    found["flag"] = found["flag"].astype(object).where(found["flag"].notna(), None)
    errors = [(norad, t, code) for norad, (t, code) in sorted(first_error.items())]
    return found, metrics, errors


def catalogue_metrics(catalogue: "screening.CatalogueLines", threshold_km: float, step_s: float) -> dict[str, Any]:
    objects, _ = screening.worker_objects(catalogue)
    figures = objects.figures(threshold_km, step_s)
    return {**figures, "cell_km": round(figures["cell_km"], 1), "cell_fast_km": round(figures["cell_fast_km"], 1)}


def screen(spark: "SparkSession", catalogue: "screening.CatalogueLines", start: float, end: float,
           threshold_km: float, step_s: float, partitions: int, ephemeris_dir: str | None = None
           ) -> tuple[pd.DataFrame, dict[str, Any], list[tuple[int, float, int]]]:
    """A full screening on Spark: (open events, filter metrics, SGP4 failures as (norad_id, time, code))."""
    metrics = catalogue_metrics(catalogue, threshold_km, step_s)
    found, counts, errors = screen_parts(spark, catalogue, [screening.Part(start, end, step_s)], start, end,
                                         threshold_km, step_s, partitions, ephemeris_dir)
    metrics.update(counts)
    return screening.combine(screening.empty_events(), found), metrics, errors


def screen_increment(spark: "SparkSession", catalogue: "screening.CatalogueLines", plan: "screening.IncrementPlan",
                     start: float, end: float, threshold_km: float, step_s: float, partitions: int,
                     ephemeris_dir: str | None = None
                     ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any], list[tuple[int, float, int]]]:
    """The plan's parts on Spark, its rechecks on the driver (while Spark works), combined with its kept
    events: (open events, the rows screened this run (found and rechecked), metrics, SGP4 failures)."""
    objects, _ = screening.worker_objects(catalogue)
    by_id = dict(zip(objects.norad_ids.tolist(), objects.satrecs))
    with ThreadPoolExecutor(1, thread_name_prefix="recheck") as pool:
        rechecking = pool.submit(screening.recheck_pairs, plan.recheck, by_id, start, end, threshold_km, step_s)
        found, metrics, errors = screen_parts(spark, catalogue, plan.parts, start, end, threshold_km, step_s,
                                              partitions, ephemeris_dir)
        rechecked = rechecking.result()
    events = screening.combine(plan.kept, found, rechecked)
    metrics.update({"mode": "full" if plan.full else "incremental", "mode_reason": plan.reason,
                    "changed_element_sets": len(plan.changed) if not plan.full else None,
                    "events_kept": len(plan.kept), "events_dropped_tca_passed": plan.dropped,
                    "pairs_rechecked": len(plan.recheck),
                    "parts": [{"start": p.start, "end": p.end, "step_s": p.step_s,
                               "focus": None if p.focus is None else len(p.focus)} for p in plan.parts]})
    return events, pd.concat([f for f in (found, rechecked) if len(f)] or [found]), metrics, errors


def run(spark: "SparkSession", settings: "Settings", args: argparse.Namespace) -> dict[str, Any]:
    from sda.lake.tables import add_missing_columns

    args = _validate(args)
    # a lakehouse from before the persistent flag / the fused covariance / the screened element sets
    for table in ("conjunctions", "alerts", "alert_events", "screening_state"):
        add_missing_columns(spark, settings, table)
    if args.replay:
        return replay(spark, settings, args)
    # the manoeuvre messages first: cheap, and out before a CDM that says MANEUVERABLE = YES of their object
    messages = publish_manoeuvres(spark, settings)
    runtime.progress(STAGE, "manoeuvre messages: %d OPMs published (%d files), %d waiting for their fused orbit; "
                     "%d withdrawn (%d waiting)", *(messages[k] for k in (
                         "manoeuvre_messages", "manoeuvre_files", "manoeuvre_messages_pending",
                         "manoeuvre_withdrawals", "manoeuvre_withdrawals_pending")))
    figures = {**screen_once(spark, settings, args, args.screen_start or args.end, lifecycle=True), **messages}
    # the alerts and CDMs are out: how long this run's landed files took to get here
    done = dt.datetime.now(dt.timezone.utc)
    figures["landing_to_alert"] = latency.landing_to_alert(spark, settings, args.run_id, done)
    return figures


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


def catalogue_lines(rows: list[dict]) -> "screening.CatalogueLines":
    return screening.CatalogueLines(tuple(int(r["norad_id"]) for r in rows), tuple(r["line1"] for r in rows),
                                    tuple(r["line2"] for r in rows))


def element_sets(spark: "SparkSession", settings: "Settings", screen_start: dt.datetime,
                 screened_lines: dict[int, tuple[str, str, float]]) -> tuple[Any, list]:
    """The element sets to screen (:func:`sda.lake.orbits.with_fused_lines`) and every usable fused orbit,
    read once for the element sets, the objects' states and the assessment."""
    newest = newest_element_sets(active_catalog(spark, settings), *SCREENED_COLUMNS)
    fused = usable_fused(spark, settings, screen_start, None, *dict.fromkeys(FUSED_COLUMNS + FUSED_READ))
    rows = newest.orderBy("norad_id").collect()
    return with_fused_lines(spark, settings, rows, screen_start, screened_lines, fused), fused


def screen_once(spark: "SparkSession", settings: "Settings", args: argparse.Namespace, screen_start: dt.datetime,
                lifecycle: bool) -> dict[str, Any]:
    """One screening of [screen_start, screen_start + horizon). With ``lifecycle`` (a scheduled or
    manual run) it is incremental on the recorded screening state (``ops.screening_state`` and
    ``ops.screening_events``; :func:`sda.orbit.screening.plan_increment` says what it redoes) and records
    the new state last; a replay screens in full and leaves the state alone."""
    previous, state_refs, screened_lines = read_state(spark, settings) if lifecycle else (None, {}, {})
    behind = previous.start - screen_start.timestamp() if previous is not None else 0.0
    if 0.0 < behind <= settings.cadence_minutes * 60.0 and args.screen_start is None and not args.full_screening:
        # The horizon does not move back: a run whose interval ends just before the recorded screening
        # started (a scheduled run queued behind a later manual one) continues from that start.
        runtime.progress(STAGE, "interval ends %.1f s before the recorded screening start: continuing from it", behind)
        screen_start = dt.datetime.fromtimestamp(previous.start, dt.timezone.utc)
    horizon_h = args.horizon_h or settings.screening_horizon_h
    start = screen_start.timestamp()
    end = start + horizon_h * 3600.0
    threshold_km, step_s = settings.screening_threshold_km, settings.screening_step_s

    chosen, fused = element_sets(spark, settings, screen_start, screened_lines)
    catalogue_rows = chosen.rows
    catalogue = catalogue_lines(catalogue_rows)
    epochs = {int(r["norad_id"]): r["epoch"] for r in catalogue_rows}
    epochs_unix = {n: aware(e).timestamp() for n, e in epochs.items()}
    plan = screening.plan_increment(previous, epochs_unix, start, end, threshold_km, step_s, screening.code_version(),
                                    full=args.full_screening or not lifecycle)
    runtime.progress(STAGE, "screening %d objects over %s h from %s: %s (%s)", len(catalogue_rows), horizon_h,
                     screen_start.isoformat(), "full" if plan.full else "incremental", plan.reason)
    events, _, screened, errors = screen_increment(spark, catalogue, plan, start, end, threshold_km, step_s,
                                                   settings.shuffle_partitions, str(settings.ephemeris_cache))
    runtime.progress(STAGE, "screened: %d open approaches under %s km (%d kept)", len(events), threshold_km,
                     len(plan.kept))
    metrics: dict[str, Any] = {"screen_start": screen_start.isoformat(), "horizon_h": horizon_h,
                               "fused_objects": chosen.fused, "fused_renewed": chosen.renewed,
                               "fused_kept": chosen.kept,
                               **catalogue_metrics(catalogue, threshold_km, step_s), **screened,
                               "sgp4_errors": len(errors), "open_events": len(events),
                               "persistent_open": int(events["flag"].map(screening.is_persistent).sum())
                               if len(events) else 0}
    if errors:
        write_propagation_errors(spark, settings, errors, epochs, args.run_id)

    # re-assess (Pc, level) the new events, and the kept ones whose objects' state changed since
    states = newest_states(spark, settings, screen_start, fused) if lifecycle else {}
    kept_ids = set(screening.event_keys(plan.kept))
    moved = {n for n in set(states) | set(state_refs) if states.get(n) != state_refs.get(n)}
    fresh = pd.Series([k not in kept_ids for k in screening.event_keys(events)], index=events.index, dtype=bool)
    restated = events["primary_id"].isin(moved) | events["secondary_id"].isin(moved)
    assess_now = events[fresh | restated]
    metrics["events_reassessed_state"] = int((~fresh & restated).sum())
    screen_end = screen_start + dt.timedelta(hours=horizon_h)
    published = publish(spark, settings, assess_now, screen_start, args.run_id, screen_end=screen_end,
                        lifecycle=lifecycle, kept=events[~(fresh | restated)], fused_rows=fused)
    runtime.progress(STAGE, "published: %d events assessed, %d kept as they were", len(assess_now),
                     len(events) - len(assess_now))
    published["events_assessed"] = published.pop("events")
    metrics.update(published)
    metrics["events"] = len(events)  # the open events of the screening (kept and new)
    if lifecycle:
        lines = {int(r["norad_id"]): (r["line1"], r["line2"]) for r in catalogue_rows}
        write_state(spark, settings, events, epochs, lines, states, screen_start, screen_end, threshold_km, step_s,
                    "full" if plan.full else "incremental", args.run_id)
        runtime.progress(STAGE, "screening state recorded: horizon to %s, %d open events", screen_end.isoformat(),
                         len(events))
    # conservation over the catalogue objects: every object is screened, or screened until SGP4
    # refused it (those are counted as quarantined and listed in ops.propagation_errors)
    n = len(catalogue.norad_ids)
    metrics.update({"records_in": n, "records_out": n - len(errors), "quarantined": len(errors), "duplicates": 0})
    return metrics


def write_propagation_errors(spark: "SparkSession", settings: "Settings", errors: list[tuple[int, float, int]],
                             epochs: dict[int, Any], run_id: str) -> None:
    from sda.orbit.catalog import sgp4_error_meaning

    rows = [(STAGE, run_id, int(norad), int(code), sgp4_error_meaning(code),
             dt.datetime.fromtimestamp(t, tz=dt.timezone.utc), epochs.get(int(norad)))
            for norad, t, code in errors]
    sinks.upsert(spark, spark.createDataFrame(rows, schemas.PROPAGATION_ERRORS), "propagation_errors", settings)


def parser() -> argparse.ArgumentParser:
    p = stage_parser(STAGE, "Screen the catalogue for close approaches and raise alerts.")
    p.add_argument("--screen-start", default=None, help="start of the screening interval (ISO-8601); default --end")
    p.add_argument("--horizon-h", type=float, default=None, help="screening horizon in hours; default settings")
    p.add_argument("--full-screening", action="store_true",
                   help="screen the whole horizon, all objects against all, whatever the recorded state")
    return p


def _validate(args: argparse.Namespace) -> argparse.Namespace:
    args = with_defaults(args, parser())
    if args.screen_start is not None and not isinstance(args.screen_start, dt.datetime):
        args.screen_start = parse_instant("screen-start", args.screen_start)
    if args.horizon_h is not None and not (0 < args.horizon_h <= 24 * 14):
        raise StageArgumentError(f"--horizon-h {args.horizon_h}: expected hours in (0, 336]")
    return args


def main(argv: list[str] | None = None, settings: "Settings | None" = None,
         spark: "SparkSession | None" = None) -> dict[str, Any]:
    return runtime.run_stage(STAGE, argv, run, parser(), settings=settings, spark=spark)


if __name__ == "__main__":
    main(sys.argv[1:])
