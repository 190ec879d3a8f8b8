"""Stage ``correlate``: silver ``observations_dedup`` -> gold ``correlated`` / ``uncorrelated`` /
``object_state``.

    spark-submit jobs/correlate.py --start ISO --end ISO --run-id ID

1. Read the observations committed since this stage's last run (change feed, ``ops.progress``).
2. The catalogue is the newest element set per object from gold ``catalog``; it is small, so its TLE
   lines travel to the Python workers inside the UDF's closure (a broadcast).
3. Observations are keyed by event-time bucket (:data:`sda.correlation.BUCKET_S`); each bucket is one
   ``applyInPandas`` group in which the catalogue is propagated once, vectorised, at the bucket's
   observation times and every observation is associated by array arithmetic
   (:func:`sda.correlation.correlate_frame`: gates, residuals, ambiguity).
4. ``correlated`` and ``uncorrelated`` are MERGEd on obs_id (insert-if-new: a replay adds nothing).
5. ``object_state`` is a keyed fold per (norad_id, 1-hour event-time window): the windows this run
   touched are recomputed from *all* of ``correlated`` in those windows and upserted, so a replay, a
   late observation or a second run converge to the same state.
6. Progress is committed last: a crash anywhere before replays the same changes into idempotent sinks.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from pyspark.sql import Window
from pyspark.sql import functions as F, types as T

from sda import correlation, runtime, schemas
from sda.tables import TABLES

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from sda.settings import Settings

STAGE = "correlate"
SOURCE = "observations_dedup"
STATE_WINDOW = "hour"  # object_state window: date_trunc unit

RESULT_FIELDS = [
    T.StructField("status", T.StringType(), False),
    T.StructField("norad_id", T.LongType()),
    T.StructField("residual_m", T.DoubleType()),
    T.StructField("candidates", T.IntegerType(), False),
    T.StructField("ambiguous", T.BooleanType(), False),
    T.StructField("reason", T.StringType()),
    T.StructField("nearest_norad_id", T.LongType()),
    T.StructField("nearest_residual_m", T.DoubleType()),
]
RESULT = T.StructType(schemas.DEDUPED.fields + RESULT_FIELDS)

# Worker-side cache: one Satrec list per catalogue (Python workers are reused between groups).
_SATRECS: dict[str, tuple[np.ndarray, list]] = {}


def latest_catalog(catalog: "DataFrame") -> "DataFrame":
    """The newest epoch of each object."""
    newest = Window.partitionBy("norad_id").orderBy(F.col("epoch").desc())
    return (
        catalog.withColumn("rank", F.row_number().over(newest))
        .where(F.col("rank") == 1)
        .select("norad_id", "line1", "line2")
    )


def bucket(event_time: "F.Column") -> "F.Column":
    return F.floor(F.unix_micros(event_time) / F.lit(correlation.BUCKET_S * 1_000_000)).cast("long")


def correlate_observations(observations: "DataFrame", catalogue: list[tuple[int, str, str]], gate_km: float,
                           optical_gate_rad: float) -> "DataFrame":
    """Observations (DEDUPED columns) -> the same columns plus the association (RESULT)."""
    ids = np.array([c[0] for c in catalogue], dtype=np.int64)
    lines1 = [c[1] for c in catalogue]
    lines2 = [c[2] for c in catalogue]
    fingerprint = hashlib.sha256("\n".join(a + b for a, b in zip(lines1, lines2)).encode()).hexdigest()
    columns = [f.name for f in RESULT.fields]

    def associate(group: pd.DataFrame) -> pd.DataFrame:
        from sda.screening import satrecs_from_lines

        if fingerprint not in _SATRECS:
            _SATRECS.clear()
            _SATRECS[fingerprint] = (ids, satrecs_from_lines(lines1, lines2))
        cat_ids, sats = _SATRECS[fingerprint]
        group = group.reset_index(drop=True)
        found = correlation.correlate_frame(group, cat_ids, sats, gate_km, optical_gate_rad)
        out = pd.concat([group, found.drop(columns=["obs_id"])], axis=1)
        return out[columns]

    return (
        observations.withColumn("bucket", bucket(F.col("event_time")))
        .groupBy("bucket")
        .applyInPandas(associate, schema=RESULT)
    )


def correlated_rows(results: "DataFrame", run_id: str) -> "DataFrame":
    return results.where(F.col("status") == "correlated").select(
        *[f.name for f in schemas.DEDUPED.fields],
        "norad_id", "residual_m", "candidates", "ambiguous",
        F.lit(run_id).alias("correlate_run_id"),
    )


def uncorrelated_rows(results: "DataFrame", run_id: str) -> "DataFrame":
    return results.where(F.col("status") == "uncorrelated").select(
        *[f.name for f in schemas.DEDUPED.fields],
        "reason", "nearest_norad_id", "nearest_residual_m",
        F.lit(run_id).alias("correlate_run_id"),
    )


def state_window(event_time: "F.Column") -> "F.Column":
    return F.date_trunc(STATE_WINDOW, event_time)


def object_state(correlated: "DataFrame", touched: "DataFrame", run_id: str) -> "DataFrame":
    """Recompute the touched (norad_id, window_start) windows from every correlated row in them."""
    rows = correlated.withColumn("window_start", state_window(F.col("event_time")))
    return (
        rows.join(F.broadcast(touched), on=["norad_id", "window_start"], how="left_semi")
        .groupBy("norad_id", "window_start")
        .agg(
            F.count(F.lit(1)).alias("observations"),
            F.avg("residual_m").alias("residual_mean_m"),
            F.sqrt(F.avg(F.col("residual_m") * F.col("residual_m"))).alias("residual_rms_m"),
            F.max("event_time").alias("last_observed"),
        )
        .select(
            "norad_id", "window_start", "observations", "residual_mean_m", "residual_rms_m", "last_observed",
            F.lit(run_id).alias("run_id"),
        )
    )


def run(spark: "SparkSession", settings: "Settings", args: argparse.Namespace) -> dict[str, Any]:
    changes, first, last = runtime.read_changes(spark, STAGE, SOURCE, settings)
    metrics: dict[str, Any] = {"versions": [first, last]}
    if first > last:
        return {**metrics, "observations": 0}
    observations = changes.dropDuplicates(["obs_id"])
    catalogue = [(int(r["norad_id"]), r["line1"], r["line2"])
                 for r in latest_catalog(TABLES["catalog"].read(spark, settings)).collect()]
    n_obs = observations.count()
    if n_obs and not catalogue:
        # Associating against nothing would file every observation as uncorrelated for good.
        raise RuntimeError("gold catalog is empty: run jobs/catalog.py before correlating observations")

    gate_rad = float(np.deg2rad(correlation.OPTICAL_GATE_DEG))
    results = correlate_observations(observations, catalogue, settings.correlation_gate_km, gate_rad).persist()
    try:
        counts = {(r["status"], r["ambiguous"]): r["count"] for r in results.groupBy("status", "ambiguous").count().collect()}
        runtime.merge_new(spark, correlated_rows(results, args.run_id), "correlated", settings)
        runtime.merge_new(spark, uncorrelated_rows(results, args.run_id), "uncorrelated", settings)
        touched = (
            results.where(F.col("status") == "correlated")
            .select("norad_id", state_window(F.col("event_time")).alias("window_start"))
            .distinct()
            .collect()
        )
    finally:
        results.unpersist()
    if touched:
        touched_df = spark.createDataFrame(touched, "norad_id long, window_start timestamp")
        days = sorted({r["window_start"].date() for r in touched})
        table = TABLES["correlated"].read(spark, settings).where(F.col("event_date").isin(days))  # partition pruning
        runtime.upsert(spark, object_state(table, touched_df, args.run_id), "object_state", settings)
    runtime.commit_progress(spark, STAGE, SOURCE, last, args.run_id, settings)
    correlated_n = sum(v for (s, _), v in counts.items() if s == "correlated")
    return {
        **metrics,
        "observations": n_obs,
        "catalogue_objects": len(catalogue),
        "correlated": correlated_n,
        "ambiguous": counts.get(("correlated", True), 0),
        "uncorrelated": sum(v for (s, _), v in counts.items() if s == "uncorrelated"),
        "state_windows": len(touched),
        "gate_km": settings.correlation_gate_km,
        "optical_gate_deg": correlation.OPTICAL_GATE_DEG,
    }


def parser() -> argparse.ArgumentParser:
    return runtime.stage_parser(STAGE, "Associate new observations with catalogue objects.")


def main(argv: list[str] | None = None, settings: "Settings | None" = None, spark: "SparkSession | None" = None) -> dict[str, Any]:
    return runtime.run_stage(STAGE, argv, run, parser(), settings=settings, spark=spark)


if __name__ == "__main__":
    main(sys.argv[1:])
