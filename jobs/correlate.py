"""Stage ``correlate``: silver ``observations_dedup`` -> gold ``correlated`` / ``uncorrelated`` /
``object_state``.

    python jobs/correlate.py --start ISO --end ISO --run-id ID

1. Read the observations committed since this stage's last run (change feed, ``ops.progress``).
2. The catalogue is the newest element set per object from gold ``catalog``; it is small, so its TLE
   lines travel to the Python workers inside the UDF's closure (a broadcast).
3. Observations are keyed by event-time bucket (:data:`sda.orbit.correlation.BUCKET_S`); each bucket is one
   ``applyInPandas`` group in which the catalogue is propagated once, vectorised, at the bucket's
   observation times and every observation is associated by array arithmetic
   (:func:`sda.orbit.correlation.correlate_frame`: spatial candidate prefilter, predicted measurements,
   a gate on the residuals normalised by the sensor's noise (sensor registry, also in the closure)
   plus the prediction's uncertainty, per-measurement residuals, ambiguity).
4. ``correlated`` and ``uncorrelated`` are MERGEd on obs_id (insert-if-new: a replay adds nothing).
5. ``object_state`` is a keyed fold per (norad_id, ``settings.state_window_s`` event-time window):
   observation count, position-miss mean / RMS, last observed time and, per measurement type, the
   count, mean and sample variance of the signed residuals. The windows this run touched are
   recomputed from *all* of ``correlated`` in those windows and upserted, so a replay, a late
   observation, a retraction or a second run converge to the same state. ``passes`` (session
   windows per sensor and object) are re-sessionised where new observations fell. Both folds are
   in :mod:`sda.transforms.folds`.
6. Progress is committed last: a crash anywhere before replays the same changes into idempotent sinks.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from sda.lake import schemas
from sda.lake.orbits import active_catalog, newest_element_sets
from sda.lake.tables import TABLES, sql_string
from sda.orbit import correlation, sensors
from sda.orbit.sensors import load_sensors
from sda.pipeline import changefeed, faults, runtime, sinks, watermarks
from sda.pipeline.arguments import stage_parser, with_defaults
from sda.transforms import folds

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from sda.config.settings import Settings

STAGE = "correlate"
SOURCE = "observations_dedup"

RESULT_FIELDS = [
    T.StructField("status", T.StringType(), False),
    T.StructField("norad_id", T.LongType()),
    T.StructField("residual_m", T.DoubleType()),
    T.StructField("candidates", T.IntegerType(), False),
    T.StructField("ambiguous", T.BooleanType(), False),
    T.StructField("reason", T.StringType()),
    T.StructField("nearest_norad_id", T.LongType()),
    T.StructField("nearest_residual_m", T.DoubleType()),
    T.StructField("gate_d2", T.DoubleType()),
    T.StructField("nearest_gate_d2", T.DoubleType()),
    *[T.StructField(c, T.DoubleType()) for c in correlation.RESIDUAL_COLUMNS],
]
RESULT = T.StructType(schemas.DEDUPED.fields + RESULT_FIELDS)

# Worker-side cache, per catalogue (Python workers are reused between groups): the Satrecs, their
# uncertainty model and which of them are candidates (one per element set).
_SATRECS: dict[str, tuple[list, "correlation.CatalogueModel", np.ndarray]] = {}


def bucket(event_time: "F.Column") -> "F.Column":
    return F.floor(F.unix_micros(event_time) / F.lit(correlation.BUCKET_S * 1_000_000)).cast("long")


def correlate_observations(observations: "DataFrame", catalogue: list[tuple[int, str, str]], gate_km: float,
                           sigmas: dict[str, dict[str, float]] | None = None,
                           prediction_sigma_m: float | None = None, light_time: bool = False) -> "DataFrame":
    """Observations (DEDUPED columns) -> the same columns plus the association (RESULT). ``sigmas``:
    :func:`sda.orbit.sensors.sensor_sigmas` (default: the embedded sensor registry).

    One grouped Arrow UDF per event-time bucket: only the columns the association reads
    (:data:`sda.orbit.correlation.OBSERVATION_COLUMNS`) become pandas; the rest of each row passes
    through as Arrow, with the result columns appended (whole rows through pandas cost more than
    the association itself)."""
    sigmas = sensors.sensor_sigmas(None) if sigmas is None else sigmas
    ids = np.array([c[0] for c in catalogue], dtype=np.int64)
    lines1 = [c[1] for c in catalogue]
    lines2 = [c[2] for c in catalogue]
    fingerprint = hashlib.sha256("\n".join(a + b for a, b in zip(lines1, lines2)).encode()).hexdigest()
    found_schema = to_arrow_schema(T.StructType(RESULT_FIELDS))
    passed = [f.name for f in schemas.DEDUPED.fields]

    def associate(table: "pa.Table") -> "pa.Table":
        import pyarrow as pa

        from sda.orbit.correlation.association import distinct_bodies
        from sda.orbit.screening import satrecs_from_lines

        if fingerprint not in _SATRECS:
            _SATRECS.clear()
            sats = satrecs_from_lines(lines1, lines2)
            _SATRECS[fingerprint] = (sats, correlation.prediction_model(sats), distinct_bodies(ids, sats))
        sats, model, bodies = _SATRECS[fingerprint]
        group = table.select(correlation.OBSERVATION_COLUMNS).to_pandas()
        found = correlation.correlate_frame(group, ids, sats, gate_km, sigmas, prediction_sigma_m, model=model,
                                            bodies=bodies, light_time=light_time)
        found = pa.Table.from_pandas(found[found_schema.names], schema=found_schema, preserve_index=False)
        return pa.Table.from_arrays([*table.select(passed).columns, *found.columns],
                                    names=[*passed, *found_schema.names])

    return (
        observations.withColumn("bucket", bucket(F.col("event_time")))
        .groupBy("bucket")
        .applyInArrow(associate, schema=RESULT)
    )


def correlated_rows(results: "DataFrame", run_id: str) -> "DataFrame":
    return results.where(F.col("status") == "correlated").select(
        *[f.name for f in schemas.DEDUPED.fields],
        "norad_id", "residual_m", "candidates", "ambiguous",
        F.lit(run_id).alias("correlate_run_id"),
        "gate_d2", *correlation.RESIDUAL_COLUMNS,
    )


def uncorrelated_rows(results: "DataFrame", run_id: str) -> "DataFrame":
    return results.where(F.col("status") == "uncorrelated").select(
        *[f.name for f in schemas.DEDUPED.fields],
        "reason", "nearest_norad_id", "nearest_residual_m",
        F.lit(run_id).alias("correlate_run_id"),
        "nearest_gate_d2",
    )


def _instant(us: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(us / 1e6, dt.timezone.utc)


def update_passes(spark: "SparkSession", settings: "Settings", new_rows: "DataFrame", sensor_marks: dict[str, int],
                  run_id: str, retracted: "DataFrame | None" = None) -> None:
    """Passes where this run's correlated observations fell, read and rewritten within bounds taken
    from the data (literal ranges, so Delta skips the rest of both tables)."""
    gap_us = int(round(settings.pass_gap_s * 1e6))
    b = new_rows.agg(F.min(F.unix_micros("event_time")).alias("lo"),
                     F.max(F.unix_micros("event_time")).alias("hi")).first()
    lo, hi = _instant(b["lo"] - gap_us), _instant(b["hi"] + gap_us)
    existing = TABLES["passes"].read(spark, settings).where(
        (F.col("pass_end") >= F.lit(lo)) & (F.col("pass_start") <= F.lit(hi)))
    e = existing.agg(F.min(F.unix_micros("pass_start")).alias("lo"),
                     F.max(F.unix_micros("pass_end")).alias("hi")).first()
    if e["lo"] is not None:
        lo, hi = min(lo, _instant(e["lo"])), max(hi, _instant(e["hi"]))
    days = [lo.date() + dt.timedelta(days=k) for k in range((hi.date() - lo.date()).days + 1)]
    nearby = TABLES["correlated"].read(spark, settings).where(
        F.col("event_date").isin(days) & F.col("event_time").between(F.lit(lo), F.lit(hi)))
    if retracted is not None:
        nearby = nearby.join(F.broadcast(retracted.select("obs_id")), on="obs_id", how="left_anti")
    write_passes(spark, folds.passes_to_write(nearby, existing, new_rows, settings, sensor_marks, run_id), settings)


def write_passes(spark: "SparkSession", rows: "DataFrame", settings: "Settings") -> None:
    """One MERGE: recomputed passes inserted or replaced, vanished ones deleted."""
    values = sinks.source_values([f.name for f in schemas.PASSES.fields])
    sinks.merge(spark, "passes", settings, rows, lambda m: (
        m.whenMatchedDelete(condition="s.action = 'delete'")
        .whenMatchedUpdate(condition="s.action = 'upsert'", set=values)
        .whenNotMatchedInsert(condition="s.action = 'upsert'", values=values)))


def finalize(spark: "SparkSession", settings: "Settings", final_before: dt.datetime | None,
             sensor_marks: dict[str, int], run_id: str) -> dict[str, int]:
    """Flip provisional windows the watermarks have passed to final (no data can change them now).
    Only provisional rows are read: Delta skips the files whose ``final`` is all true."""
    done = {"state_windows_finalized": 0, "passes_finalized": 0}
    mark = {"final": "true", "run_id": sql_string(run_id)}
    if final_before is not None:
        bound = final_before.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        done["state_windows_finalized"] = sinks.update(
            spark, "object_state", settings, f"NOT final AND window_end <= TIMESTAMP'{bound}'", mark)
    if sensor_marks:
        condition = folds.pass_final_sql(sensor_marks, settings.pass_gap_s, settings.dedup_window_s)
        done["passes_finalized"] = sinks.update(spark, "passes", settings, f"NOT final AND ({condition})", mark)
    return done


def newest_batch(spark: "SparkSession", settings: "Settings", args: argparse.Namespace, changes_batch: int | None,
                 retracted: "DataFrame") -> int | None:
    """The newest ingest batch this run has seen (changes, retractions): finality is judged by it."""
    newest = max((b for b in (changes_batch, retracted.agg(F.max("ingest_batch")).first()[0]) if b is not None),
                 default=None)
    if args.replay and newest is not None:
        # A replay's range may be old: judge finality by the newest batch this stage has processed,
        # so a replay never turns a final window provisional again.
        done = [TABLES[t].read(spark, settings).agg(F.max("ingest_batch")).first()[0]
                for t in ("correlated", "uncorrelated")]
        newest = max([newest, *[b for b in done if b is not None]])
    return newest


def write_associations(spark: "SparkSession", settings: "Settings", results: "DataFrame", run_id: str) -> dict:
    """Write ``correlated`` and ``uncorrelated``; returns the association counts by (status, ambiguous)."""
    counts = {(r["status"], r["ambiguous"]): r["count"]
              for r in results.groupBy("status", "ambiguous").count().collect()}
    runtime.progress(STAGE, "associated: %s; writing gold", counts)
    faults.checkpoint("correlate:before-write")
    # an empty side costs no MERGE (a retry finds the same counts: the results are deterministic)
    if any(status == "correlated" for status, _ in counts):
        # one result per observation, and the observations are distinct by obs_id (run)
        sinks.merge_new(spark, correlated_rows(results, run_id), "correlated", settings, unique=True)
    faults.checkpoint("correlate:after-correlated")
    if any(status == "uncorrelated" for status, _ in counts):
        sinks.merge_new(spark, uncorrelated_rows(results, run_id), "uncorrelated", settings, unique=True)
    faults.checkpoint("correlate:after-uncorrelated")
    return counts


def changed_rows(spark: "SparkSession", settings: "Settings", results: "DataFrame",
                 withdrawn: "DataFrame | None") -> "DataFrame":
    """(sensor_id, norad_id, event_time) where this run changes gold: the observations it correlated
    and, when dedup withdrew some (``withdrawn``: obs_id, event_date), where those were correlated."""
    new_rows = results.where(F.col("status") == "correlated").select("sensor_id", "norad_id", "event_time")
    if withdrawn is None:
        return new_rows
    gone = (TABLES["correlated"].read(spark, settings)
            .join(F.broadcast(withdrawn), on=["obs_id", "event_date"], how="left_semi")
            .select("sensor_id", "norad_id", "event_time"))
    return new_rows.unionByName(gone).localCheckpoint()


def write_object_state(spark: "SparkSession", settings: "Settings", touched: list, final_before: dt.datetime | None,
                       run_id: str, withdrawn: "DataFrame | None") -> int:
    """Recompute and upsert the ``touched`` (norad_id, window_start) windows of ``object_state`` without the
    ``withdrawn`` observations, deleting those left empty; returns how many were there already (re-fired)."""
    window_s = settings.state_window_s
    touched_df = spark.createDataFrame(touched, "norad_id long, window_start timestamp")
    days = sorted({r["window_start"].date() for r in touched}
                  | {(r["window_start"] + dt.timedelta(seconds=window_s)).date() for r in touched})
    table = TABLES["correlated"].read(spark, settings).where(F.col("event_date").isin(days))  # partition pruning
    if withdrawn is not None:
        table = table.join(F.broadcast(withdrawn.select("obs_id")), on="obs_id", how="left_anti")
    state = folds.object_state(table, touched_df, window_s, final_before, run_id).localCheckpoint()
    lo, hi = min(r["window_start"] for r in touched), max(r["window_start"] for r in touched)
    existing_state = TABLES["object_state"].read(spark, settings).where(
        F.col("window_start").between(F.lit(lo), F.lit(hi)))  # file skipping by window_start
    refired = state.join(existing_state.select("norad_id", "window_start"),
                         on=["norad_id", "window_start"], how="left_semi").count()
    sinks.upsert(spark, state, "object_state", settings, unique=True)  # grouped by its key
    emptied = touched_df.join(state.select("norad_id", "window_start"), on=["norad_id", "window_start"],
                              how="left_anti")
    if emptied.take(1):  # windows whose only observations were withdrawn
        sinks.delete_keys(spark, emptied, "object_state", settings)
    faults.checkpoint("correlate:after-object-state")
    return refired


def update_state(spark: "SparkSession", settings: "Settings", results: "DataFrame", retracted: "DataFrame",
                 sensor_marks: dict[str, int], final_before: dt.datetime | None, run_id: str) -> dict[str, int]:
    """Fold this run's associations and dedup's retractions into ``object_state`` and ``passes``, then
    delete the retracted observations from gold; returns the figures for the run's metrics."""
    # Observations dedup withdrew: their state windows and passes are recomputed without them
    # (reads below skip them), and they are deleted last, so a retry still finds them.
    retracted = retracted.select("obs_id", "event_date").localCheckpoint()
    n_retracted = retracted.count()
    withdrawn = retracted if n_retracted else None
    new_rows = changed_rows(spark, settings, results, withdrawn)
    window_start = watermarks.window_start(F.col("event_time"), settings.state_window_s).alias("window_start")
    touched = new_rows.select("norad_id", window_start).distinct().collect()
    figures = {"retracted": n_retracted, "state_windows": len(touched)}
    if touched:
        figures["state_windows_refired"] = write_object_state(spark, settings, touched, final_before, run_id, withdrawn)
        update_passes(spark, settings, new_rows, sensor_marks, run_id, withdrawn)
        faults.checkpoint("correlate:after-passes")
    if n_retracted:
        for table_name in ("correlated", "uncorrelated"):
            sinks.delete_keys(spark, retracted, table_name, settings)
    return figures


def run(spark: "SparkSession", settings: "Settings", args: argparse.Namespace) -> dict[str, Any]:
    args = with_defaults(args, parser())
    # net changes: dedup replaces a representative when an earlier copy of it arrives later
    changes, retracted, first, last = changefeed.net_changes_for(spark, STAGE, SOURCE, settings, args)
    metrics: dict[str, Any] = {"versions": [first, last], "records_in": 0, "records_out": 0, "quarantined": 0,
                               "duplicates": 0, "late": 0, "observations": 0}
    if first > last:
        return metrics
    catalogue = [(int(r["norad_id"]), r["line1"], r["line2"])
                 for r in newest_element_sets(active_catalog(spark, settings), "line1", "line2").collect()]
    totals = changes.agg(F.count(F.lit(1)).alias("n"), F.count_distinct("obs_id").alias("ids"),
                         F.max("ingest_batch").alias("batch")).first()
    # the net changes are one row per obs_id: the shuffle that would make them so is paid only if not
    observations = changes if totals["n"] == totals["ids"] else changes.dropDuplicates(["obs_id"])
    newest = newest_batch(spark, settings, args, totals["batch"], retracted)
    n_obs = totals["ids"]
    # a row the change feed carries twice (inserted, then its copies count updated) is one observation
    metrics.update(records_in=totals["n"], duplicates=totals["n"] - totals["ids"])
    if n_obs and not catalogue:
        # Associating against nothing would file every observation as uncorrelated for good.
        raise RuntimeError("gold catalog is empty: run jobs/catalog.py before correlating observations")

    # What the watermarks say once every batch this run has seen is in: windows that end before
    # them are final (see sda.pipeline.watermarks).
    sensor_marks, pipeline_mark = watermarks.current(spark, settings, int(newest)) if newest else ({}, None)
    final_before = None if pipeline_mark is None else dt.datetime.fromtimestamp(pipeline_mark / 1e6, dt.timezone.utc)

    # The prediction-uncertainty term of the gate: each element set's own (sda.orbit.correlation, from its
    # epoch and regime in the TLE lines), unless the setting fixes one isotropic sigma.
    prediction_sigma_m = settings.correlation_prediction_sigma_m
    sigmas = sensors.sensor_sigmas(load_sensors())
    runtime.progress(STAGE, "%d observations against %d catalogue objects", n_obs, len(catalogue))
    results = correlate_observations(observations, catalogue, settings.correlation_gate_km, sigmas,
                                     prediction_sigma_m, settings.light_time).persist()
    try:
        counts = write_associations(spark, settings, results, args.run_id)
        metrics.update(update_state(spark, settings, results, retracted, sensor_marks, final_before, args.run_id))
    finally:
        results.unpersist()
    metrics.update(finalize(spark, settings, final_before, sensor_marks, args.run_id))
    correlated_n = sum(v for (s, _), v in counts.items() if s == "correlated")
    uncorrelated_n = sum(v for (s, _), v in counts.items() if s == "uncorrelated")
    return {
        **metrics,
        "records_out": correlated_n + uncorrelated_n,
        "observations": n_obs,
        "catalogue_objects": len(catalogue),
        "correlated": correlated_n,
        "ambiguous": counts.get(("correlated", True), 0),
        "cross_tags": counts.get(("uncorrelated", True), 0),  # held: two objects about equally likely
        "uncorrelated": uncorrelated_n,
        "pipeline_watermark": final_before.isoformat() if final_before else None,
        "watermark": final_before.isoformat() if final_before else None,
        "gate_km": settings.correlation_gate_km,
        "gate_tail": correlation.GATE_TAIL,
        "prediction_sigma_m": prediction_sigma_m,
        "consumed": {SOURCE: last},
    }


def parser() -> argparse.ArgumentParser:
    return stage_parser(STAGE, "Associate new observations with catalogue objects.")


def main(argv: list[str] | None = None, settings: "Settings | None" = None,
         spark: "SparkSession | None" = None) -> dict[str, Any]:
    return runtime.run_stage(STAGE, argv, run, parser(), settings=settings, spark=spark)


if __name__ == "__main__":
    main(sys.argv[1:])
