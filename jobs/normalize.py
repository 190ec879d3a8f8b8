"""normalize: bronze (three wire formats) -> silver ``observations`` (one envelope, SI units) + quarantine.

    python jobs/normalize.py --start ISO --end ISO --run-id ID

Reads what each bronze table received since this stage last ran (change feed), parses it
(:mod:`sda.transforms.wire`), checks it against the sensor registry, physical limits and event-time bounds
(no more than ``clock_skew_s`` ahead of its ingest time; an *old* event is not refused here:
lateness is judged against event-time windows downstream, never by wall-clock arrival), converts units
(:mod:`sda.transforms.envelope`) and writes:

* silver with ``merge_new`` on ``obs_id``, a hash of the measurement's content: a redelivered copy
  (same frame sent twice, same row in two archive files) finds its id taken and is counted as a
  duplicate, and a retried run inserts nothing twice;
* quarantine with ``merge_new`` on ``quarantine_id`` (stage, bronze record, detection);
* ``ops.watermarks``: per sensor and ingest batch, the newest event time that arrived (upserted; the
  same rows on every replay), from which :mod:`sda.pipeline.watermarks` derives every watermark;
* then, and only then, the bronze versions consumed (``ops.progress``, by ``runtime.run_stage``):
  a crash before that replays the same changes into the idempotent sinks.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from sda.config.settings import Settings
from sda.lake.tables import BRONZE_BY_KIND, TABLES, table_exists
from sda.pipeline import changefeed, faults, runtime, sinks, watermarks
from sda.pipeline.arguments import stage_parser, with_defaults
from sda.transforms import envelope, tdm, wire
from sda.transforms.envelope import sensors_frame

STAGE = "normalize"


def pick_winners(measurements: DataFrame) -> DataFrame:
    """``copy_rank`` per accepted measurement: 1 for one row per obs_id among this batch's copies, the
    same one on every retry (smallest bronze id; copies sharing a bronze id are one record's identical
    detections); null for a refused one."""
    first = Window.partitionBy("obs_id").orderBy("bronze_id")
    return measurements.withColumn("copy_rank", F.when(F.col("reason").isNull(), F.row_number().over(first)))


def classify(ranked: DataFrame, existing: DataFrame) -> DataFrame:
    """``status`` per accepted measurement: ``out`` (its observation is this record's) or ``duplicate``.

    ``existing`` holds (obs_id, existing_bronze_id) of silver as it was before this run's write, so
    a retry after a crash that had already written silver classifies every row as the first try did.
    """
    joined = ranked.join(existing, on="obs_id", how="left")
    mine = F.col("existing_bronze_id").isNull() | (F.col("existing_bronze_id") == F.col("bronze_id"))
    status = F.when((F.col("copy_rank") == 1) & mine, F.lit("out")).otherwise(F.lit("duplicate"))
    return joined.select("obs_id", "sensor_kind", status.alias("status"))


def catalogue_names(spark: SparkSession, settings: Settings) -> dict[str, int | None]:
    """The catalogue's object names and international designators, which a TDM may give its tracked
    object by (:func:`sda.transforms.tdm.object_aliases`); none before the catalogue exists."""
    if not table_exists("catalog", settings):
        return {}
    rows = (TABLES["catalog"].read(spark, settings)
            .select("norad_id", "name", F.substring("line1", 1, 17).alias("line1")).distinct().collect())
    return tdm.object_aliases((r["norad_id"], r["name"], r["line1"]) for r in rows)


def run(spark: SparkSession, settings: Settings, args: argparse.Namespace) -> dict[str, Any]:
    args = with_defaults(args, parser())
    metrics: dict[str, Any] = {"bronze_records": 0, "records_in": 0, "records_out": 0, "quarantined": 0,
                               "duplicates": 0}
    parts, consumed = [], []
    for kind, spec in BRONZE_BY_KIND.items():
        changes, first, last = changefeed.changes_for(spark, STAGE, spec.name, settings, args)
        if first > last:
            continue
        consumed.append((spec.name, last))
        parts.append(wire.parse_bronze(changes, kind, catalogue_names(spark, settings) if kind == "tdm" else None,
                                       settings.light_time))
        metrics["bronze_records"] += changes.count()
        runtime.progress(STAGE, "%s: %d bronze records to parse", spec.name, metrics["bronze_records"])
    if not parts:
        return metrics

    parsed = functools.reduce(DataFrame.unionByName, parts)
    registry = envelope.registry_columns(sensors_frame(spark))
    # used by the metrics and both writes: parse and validate once
    checked = envelope.validate(parsed, registry, settings.clock_skew_s)
    if args.replay:  # the range's observations only (bronze was selected by ingest time, see changefeed.replay_rows)
        checked = checked.where((F.col("event_time") >= F.lit(args.start)) & (F.col("event_time") < F.lit(args.end)))
    # one cache, of every measurement: both writes and the metrics read it
    ranked = pick_winners(envelope.to_measurements(checked, args.run_id)).persist()
    try:
        accepted = ranked.where(F.col("reason").isNull())
        refused = envelope.to_quarantine(ranked.where(F.col("reason").isNotNull()), STAGE, args.run_id)

        silver = TABLES["observations"]
        version = changefeed.table_version(spark, silver.name, settings)
        dates = [r["event_date"] for r in accepted.select("event_date").distinct().collect()]
        existing = (
            spark.read.format("delta").option("versionAsOf", version).load(silver.path(settings))
            .where(F.col("event_date").isin(dates))
            .select("obs_id", F.col("bronze_id").alias("existing_bronze_id"))
        )
        # counted before writing: afterwards silver already holds this run's rows
        for row in classify(accepted, existing).groupBy("status").count().collect():
            metrics["records_out" if row["status"] == "out" else "duplicates"] += row["count"]
        metrics["quarantined"] = refused.count()
        metrics["by_kind"] = {r["sensor_kind"]: r["count"] for r in ranked.groupBy("sensor_kind").count().collect()}
        metrics["records_in"] = sum(metrics["by_kind"].values())

        faults.checkpoint("normalize:before-write")
        # arrivals first: every silver row then has its batch's watermark row
        if not args.replay:  # the watermarks record arrivals, and a replay is not one
            arrivals = [tuple(r) for r in watermarks.batch_maxima(accepted, args.run_id)
                        .select(*TABLES["watermarks"].schema.fieldNames()).collect()]
            sinks.write_rows(spark, arrivals, "watermarks", settings)
            metrics["sensor_newest"] = watermarks.newest_per_sensor(arrivals)
        faults.checkpoint("normalize:after-watermarks")
        sinks.merge_new(spark, accepted.where(F.col("copy_rank") == 1), silver.name, settings, unique=True)
        faults.checkpoint("normalize:after-silver")
        if metrics["quarantined"]:  # an empty MERGE would still read the quarantine table
            sinks.merge_new(spark, refused, "quarantine", settings)
    finally:
        ranked.unpersist()
    metrics["consumed"] = dict(consumed)
    return metrics


def parser() -> argparse.ArgumentParser:
    return stage_parser(STAGE, "bronze -> silver observations (SI units, registry-checked)")


def main(argv: list[str] | None = None, settings: Settings | None = None,
         spark: SparkSession | None = None) -> dict[str, Any]:
    return runtime.run_stage(STAGE, argv, run, parser(), settings=settings, spark=spark)


if __name__ == "__main__":
    main(sys.argv[1:])
