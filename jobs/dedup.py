"""dedup: silver ``observations`` -> silver ``observations_dedup`` (repeats of one measurement folded).

    python jobs/dedup.py --start ISO --end ISO --run-id ID

Exact redeliveries already share an ``obs_id`` and collapsed in silver. This stage folds what is
left: one sensor reporting the same measurement more than once with slightly different timestamps
or values (re-stamped frames, overlapping archive exports) -- same sensor, event times within
``envelope.NEAR_DUP_MAX_DT_S`` and measurements within a few sigma (see :mod:`sda.transforms.envelope`).

State lives in silver itself, so the result does not depend on arrival order:

1. the change feed gives the observations new since the last run; their (sensor, fixed
   ``dedup_window_s`` window) pairs are the windows touched;
2. *all* silver observations (at the version read) of those sensors in the touched windows and their
   neighbours are clustered again from scratch -- a near-duplicate landing in a later run meets the
   rows it duplicates, whichever came first;
3. every cluster with a member in a touched window is written by one MERGE on ``obs_id``: the
   representative (earliest event time, then smallest obs_id) is inserted or gets its new ``copies``,
   any other member still present (a representative displaced by an earlier arrival) is deleted;
   members it would not change are left out of its source (Delta would rewrite their files unchanged);
4. late data: every row is first checked against the watermarks of its arrival batch
   (:mod:`sda.pipeline.watermarks`); a new row whose window was already final goes to ``ops.late_data`` with
   its lateness instead, and late rows never join a cluster, so a final window never changes;
5. progress is committed after the MERGE (by ``runtime.run_stage``); a retry recomputes the same
   clusters and the MERGE changes nothing.

A cluster is assumed to span less than one window (it would need a chain of a hundred repeats 0.1 s
apart to span 10 s).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sda.config.settings import Settings
from sda.lake import schemas
from sda.lake.tables import TABLES
from sda.pipeline import changefeed, faults, runtime, sinks, watermarks
from sda.pipeline.arguments import stage_parser, with_defaults
from sda.transforms import envelope

STAGE = "dedup"
SOURCE = "observations"
TARGET = "observations_dedup"


def touched_windows(changes: DataFrame, window_s: float) -> DataFrame:
    """(sensor_id, win) of the new observations."""
    return changes.select("sensor_id", envelope.window_index(F.col("event_time"), window_s).alias("win")).distinct()


def search_scope(touched: DataFrame, window_s: float) -> DataFrame:
    """The touched windows and their neighbours: where a near-duplicate of a new row can be."""
    k = envelope.neighbour_windows(window_s)
    neighbours = F.explode(F.sequence(F.col("win") - k, F.col("win") + k)).alias("win")
    return touched.select("sensor_id", neighbours).distinct()


def clusters_to_write(candidates: DataFrame, touched: DataFrame, window_s: float) -> DataFrame:
    """Cluster the candidate observations; keep the clusters with a member in a touched window
    (the others are unchanged by this run), each member flagged ``is_rep`` (and ``is_new`` kept)."""
    flagged = touched.withColumn("touched", F.lit(True))
    marked = (
        candidates.withColumn("win", envelope.window_index(F.col("event_time"), window_s))
        .join(F.broadcast(flagged), on=["sensor_id", "win"], how="left")
        .withColumn("touched", F.coalesce(F.col("touched"), F.lit(False)))
        .drop("win")
    )
    return envelope.cluster(marked).select(*[f.name for f in schemas.DEDUPED.fields], "is_rep", "is_new")


def changed_members(spark: SparkSession, members: DataFrame, settings: Settings,
                    lo: dt.datetime, hi: dt.datetime) -> DataFrame:
    """The members the MERGE changes something for: a representative the table lacks or holds with
    another ``copies`` (its other columns are its silver row's, which never change), a displaced member
    the table still holds. Delta rewrites every file with a row the MERGE matches, even when no clause
    applies to the row, so the unchanged rows -- the neighbours re-clustered each run, all of a
    replay -- are left out first, against the table's keys and counts between ``lo`` and ``hi`` (aware
    bounds of the members' event times)."""
    held = (
        TABLES[TARGET].read(spark, settings)
        .where(F.col("event_date").between(lo.date(), hi.date()))
        .where(F.col("event_time").between(F.lit(lo), F.lit(hi)))
        .select("obs_id", F.col("copies").alias("held_copies"))
    )
    changed = F.when(F.col("is_rep"), F.col("held_copies").isNull() | (F.col("held_copies") != F.col("copies")))
    return members.join(held, on="obs_id", how="left").where(
        changed.otherwise(F.col("held_copies").isNotNull())).drop("held_copies")


def write_clusters(spark: SparkSession, members: DataFrame, settings: Settings,
                   lo: dt.datetime, hi: dt.datetime) -> dict[str, int]:
    """One MERGE: representatives inserted or refreshed, displaced members deleted."""
    values = sinks.source_values([f.name for f in schemas.DEDUPED.fields])
    # event_date is the same for a row in both tables (copied from silver): its range prunes partitions
    counts = sinks.merge(spark, TARGET, settings, changed_members(spark, members, settings, lo, hi), lambda m: (
        m.whenMatchedDelete(condition="NOT s.is_rep")
        .whenMatchedUpdate(condition="s.is_rep AND t.copies <> s.copies", set=values)
        .whenNotMatchedInsert(condition="s.is_rep", values=values)))
    return {
        "rows_inserted": counts.get("num_inserted_rows", 0),
        "rows_updated": counts.get("num_updated_rows", 0),
        "rows_deleted": counts.get("num_deleted_rows", 0),
    }


def late_rows(flagged: DataFrame, run_id: str) -> DataFrame:
    return flagged.where(F.col("late")).select(
        *[f.name for f in schemas.OBSERVATION.fields],
        F.lit(STAGE).alias("late_stage"), "window_end", "watermark", "lateness_s", F.lit(run_id).alias("late_run_id"),
    )


def run(spark: SparkSession, settings: Settings, args: argparse.Namespace) -> dict[str, Any]:
    args = with_defaults(args, parser())
    metrics: dict[str, Any] = {"records_in": 0, "records_out": 0, "quarantined": 0, "duplicates": 0, "late": 0,
                               "exact_duplicates": 0, "near_duplicates": 0}
    changes, first, last = changefeed.changes_for(spark, STAGE, SOURCE, settings, args)
    if first > last:
        return metrics
    window_s = settings.dedup_window_s
    stats = changes.agg(F.count("*").alias("n"), F.count_distinct("obs_id").alias("ids"),
                        F.min("event_time").alias("lo"), F.max("event_time").alias("hi"),
                        F.max("ingest_batch").alias("newest")).first()
    metrics["records_in"] = stats["n"]
    runtime.progress(STAGE, "%d observations in, event times %s .. %s", stats["n"], stats["lo"], stats["hi"])
    metrics["exact_duplicates"] = stats["n"] - stats["ids"]
    if stats["n"]:
        # Silver at the version the change feed was read to: a retry sees the same rows, and rows
        # normalize adds meanwhile wait for the next run (they are in the next change feed).
        margin = dt.timedelta(seconds=window_s * (envelope.neighbour_windows(window_s) + 1))
        # collected timestamps are naive local time; as aware UTC their dates are event_date's
        lo = stats["lo"].astimezone(dt.timezone.utc) - margin
        hi = stats["hi"].astimezone(dt.timezone.utc) + margin
        scope = search_scope(touched_windows(changes, window_s), window_s)
        # silver is insert-only: its rows as of ``last`` are the new rows plus the older ones, each
        # once, so the new rows are marked without matching them up by obs_id
        older = (
            changefeed.rows_before(spark, SOURCE, settings, args, first, last)
            .where(F.col("event_date").between(lo.date(), hi.date()))
            .where(F.col("event_time").between(F.lit(lo), F.lit(hi)))
            .withColumn("win", envelope.window_index(F.col("event_time"), window_s))
            .join(F.broadcast(scope), on=["sensor_id", "win"], how="left_semi")
            .drop("win")
        )
        nearby = older.withColumn("is_new", F.lit(False)).unionByName(changes.withColumn("is_new", F.lit(True)))
        # The late gate: each row against the watermarks of its own arrival batch. Late rows (new or
        # not) never join a cluster, so a final window's result cannot change.
        marks = watermarks.lookup(spark, settings, nearby)
        flagged = watermarks.flag_late(nearby, marks, settings).persist()
        try:
            on_time = flagged.where(~F.col("late")).drop("late", "window_end", "watermark", "lateness_s")
            touched = touched_windows(flagged.where(F.col("is_new") & ~F.col("late")), window_s).persist()
            members = clusters_to_write(on_time, touched, window_s).persist()
            try:
                metrics["late"] = flagged.where(F.col("is_new") & F.col("late")).count()
                # every new on-time row is a member (its own window is touched): its fate is in members
                metrics["clusters_written"] = 0
                for row in members.groupBy("is_new", "is_rep").count().collect():
                    if row["is_new"]:
                        metrics["records_out" if row["is_rep"] else "near_duplicates"] += row["count"]
                    if row["is_rep"]:
                        metrics["clusters_written"] += row["count"]
                faults.checkpoint("dedup:before-write")
                if metrics["late"]:
                    sinks.merge_new(spark, late_rows(flagged.where(F.col("is_new")), args.run_id), "late_data",
                                    settings)
                faults.checkpoint("dedup:after-late")
                metrics.update(write_clusters(spark, members, settings, lo, hi))
            finally:
                members.unpersist()
                touched.unpersist()
        finally:
            flagged.unpersist()
    metrics["duplicates"] = metrics["exact_duplicates"] + metrics["near_duplicates"]
    metrics["consumed"] = {SOURCE: last}
    newest = stats["newest"]
    if newest is not None:  # the pipeline watermark once this run's batches are in (sda.pipeline.watermarks)
        _, mark = watermarks.current(spark, settings, int(newest))
        metrics["watermark"] = (None if mark is None
                                else dt.datetime.fromtimestamp(mark / 1e6, dt.timezone.utc).isoformat())
    return metrics


def parser() -> argparse.ArgumentParser:
    return stage_parser(STAGE, "silver observations -> observations_dedup (repeats folded)")


def main(argv: list[str] | None = None, settings: Settings | None = None,
         spark: SparkSession | None = None) -> dict[str, Any]:
    return runtime.run_stage(STAGE, argv, run, parser(), settings=settings, spark=spark)


if __name__ == "__main__":
    main(sys.argv[1:])
