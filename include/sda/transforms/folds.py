"""The per-object folds of gold, as DataFrame transforms (jobs/correlate.py writes them).

* :func:`object_state`: per (norad_id, fixed event-time window), the window's observation count,
  position-miss mean and RMS, last observed time and, per measurement type, the residuals' count, mean
  and sample variance -- always recomputed from every correlated row of the window, so late
  observations, retractions and replays converge to the same state;
* :func:`sessions` / :func:`passes_to_write`: a sensor's passes over an object (session windows: a
  pass ends after more than ``pass_gap_s`` without an observation), re-sessionised where new
  observations fell; :func:`pass_final` / :func:`pass_final_sql` say when a pass can no longer change.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

from sda.lake import schemas
from sda.lake.tables import sql_string
from sda.pipeline import watermarks

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

    from sda.config.settings import Settings


def object_state(correlated: "DataFrame", touched: "DataFrame", window_s: float, final_before: dt.datetime | None,
                 run_id: str) -> "DataFrame":
    """Recompute the touched (norad_id, window_start) windows from every correlated row in them;
    a window is final when it ends at or before ``final_before`` (the pipeline watermark).

    Per measurement type (:data:`sda.lake.schemas.MEASUREMENT_RESIDUALS`): the number of the window's
    observations that carry that residual, its mean and its sample variance (n - 1 denominator, null
    for fewer than 2) -- ambiguous associations included, counted apart in
    ``ambiguous_observations``. Every aggregate is a whole-window recomputation, so the fold stays
    exact when observations arrive late or are withdrawn."""
    rows = correlated.withColumn("window_start", watermarks.window_start(F.col("event_time"), window_s))
    window_end = F.col("window_start") + F.make_dt_interval(secs=F.lit(window_s))
    final = F.lit(False) if final_before is None else window_end <= F.lit(final_before)
    # mean and sample variance derived from the count, sum and sum of squares: var_samp's running
    # moments made the aggregation three times slower
    per_measurement, derived, names = [], [], []
    for name, unit, var_unit in schemas.MEASUREMENT_RESIDUALS:
        column = F.col(f"residual_{name}_{unit}")
        count, mean, var = f"residual_{name}_count", f"residual_{name}_mean_{unit}", f"residual_{name}_var_{var_unit}"
        per_measurement += [F.count(column).alias(count), F.sum(column).alias(f"s1_{name}"),
                            F.sum(column * column).alias(f"s2_{name}")]
        n, s1, s2 = F.col(count), F.col(f"s1_{name}"), F.col(f"s2_{name}")
        # a residual is never millions of sigmas from its window's mean: the sums lose nothing that shows
        sample_var = F.greatest((s2 - s1 * s1 / n) / (n - 1), F.lit(0.0))
        derived += [(s1 / n).alias(mean), F.when(n >= 2, sample_var).alias(var)]
        names += [count, mean, var]
    return (
        rows.join(F.broadcast(touched), on=["norad_id", "window_start"], how="left_semi")
        .groupBy("norad_id", "window_start")
        .agg(
            F.count(F.lit(1)).alias("observations"),
            F.avg("residual_m").alias("residual_mean_m"),
            F.sqrt(F.avg(F.col("residual_m") * F.col("residual_m"))).alias("residual_rms_m"),
            F.max("event_time").alias("last_observed"),
            F.count_if(F.col("ambiguous")).cast("long").alias("ambiguous_observations"),
            *per_measurement,
        )
        .select("*", *derived)
        .select(
            "norad_id", "window_start", window_end.alias("window_end"), "observations", "residual_mean_m",
            "residual_rms_m", "last_observed", final.alias("final"), F.lit(run_id).alias("run_id"),
            "ambiguous_observations", *names,
        )
    )


def sessions(rows: "DataFrame", gap_s: float) -> "DataFrame":
    """Session windows over (sensor_id, norad_id): a pass ends after more than ``gap_s`` without an
    observation (Spark's ``session_window`` semantics). Numbered by one sorted pass per (sensor,
    object) -- a new pass where the time since the previous observation exceeds the gap -- which costs
    a third of ``session_window``'s per-row pre-aggregation, sort and merge."""
    in_order = Window.partitionBy("sensor_id", "norad_id").orderBy("event_time")
    t_us = F.unix_micros("event_time")
    opens = F.coalesce(t_us - F.lag(t_us).over(in_order) > F.lit(int(round(gap_s * 1e6))), F.lit(True))
    numbered = rows.withColumn("pass_no", F.sum(opens.cast("int")).over(
        in_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
    return numbered.groupBy("sensor_id", "norad_id", "pass_no").agg(
        F.min("event_time").alias("pass_start"),
        F.max("event_time").alias("pass_end"),
        F.count(F.lit(1)).alias("observations"),
        F.sqrt(F.avg(F.col("residual_m") * F.col("residual_m"))).alias("residual_rms_m"),
    ).drop("pass_no")


def pass_final(sensor_marks: dict[str, int], gap_s: float, dedup_window_s: float) -> "F.Column":
    """A pass is final when no observation its sensor may still deliver can join it: anything on
    time is later than ``W_s - dedup_window`` (see sda.pipeline.watermarks), so the pass is closed once
    ``pass_end + gap <= W_s - dedup_window``."""
    if not sensor_marks:
        return F.lit(False)
    marks = F.create_map(*[x for s, w in sorted(sensor_marks.items()) for x in (F.lit(s), F.lit(w))])
    limit = F.unix_micros(F.col("pass_end")) + F.lit(int(round((gap_s + dedup_window_s) * 1e6)))
    return F.coalesce(limit <= marks[F.col("sensor_id")], F.lit(False))


def pass_final_sql(sensor_marks: dict[str, int], gap_s: float, dedup_window_s: float) -> str:
    """:func:`pass_final` as a SQL condition (for an ``UPDATE ... WHERE``)."""
    if not sensor_marks:
        return "false"
    cases = " ".join(f"WHEN {sql_string(s)} THEN {int(w)}" for s, w in sorted(sensor_marks.items()))
    limit = int(round((gap_s + dedup_window_s) * 1e6))
    return f"COALESCE(unix_micros(pass_end) + {limit} <= (CASE sensor_id {cases} END), false)"


def passes_to_write(correlated: "DataFrame", existing: "DataFrame", new_rows: "DataFrame", settings: "Settings",
                    sensor_marks: dict[str, int], run_id: str) -> "DataFrame":
    """Re-sessionise where new observations fell and say what to do with each pass row.

    Per (sensor, object) touched, the span to redo is the new observations +- gap, widened to every
    existing pass that overlaps it (one widening suffices: existing passes are separated by more
    than the gap). Output: PASSES columns + ``action`` (``upsert`` for the recomputed passes,
    ``delete`` for old passes in the span that no longer exist, e.g. two merged by a bridging
    observation).
    """
    gap = F.make_dt_interval(secs=F.lit(settings.pass_gap_s))
    spans = new_rows.groupBy("sensor_id", "norad_id").agg(
        (F.min("event_time") - gap).alias("lo"), (F.max("event_time") + gap).alias("hi"))
    overlapping = existing.join(F.broadcast(spans), on=["sensor_id", "norad_id"]).where(
        (F.col("pass_end") >= F.col("lo")) & (F.col("pass_start") <= F.col("hi")))
    widened = (
        spans.join(overlapping.groupBy("sensor_id", "norad_id").agg(
            F.min("pass_start").alias("p_lo"), F.max("pass_end").alias("p_hi")),
            on=["sensor_id", "norad_id"], how="left")
        .select("sensor_id", "norad_id", F.least("lo", F.coalesce("p_lo", "lo")).alias("lo"),
                F.greatest("hi", F.coalesce("p_hi", "hi")).alias("hi"))
    )
    in_span = correlated.join(F.broadcast(widened), on=["sensor_id", "norad_id"]).where(
        F.col("event_time").between(F.col("lo"), F.col("hi")))
    recomputed = sessions(in_span, settings.pass_gap_s).select(
        "sensor_id", "norad_id", "pass_start", "pass_end", "observations", "residual_rms_m",
        pass_final(sensor_marks, settings.pass_gap_s, settings.dedup_window_s).alias("final"),
        F.lit(run_id).alias("run_id"), F.lit("upsert").alias("action"))
    old = existing.join(F.broadcast(widened), on=["sensor_id", "norad_id"]).where(
        (F.col("pass_end") >= F.col("lo")) & (F.col("pass_start") <= F.col("hi")))
    gone = old.join(recomputed.select("sensor_id", "norad_id", "pass_start"),
                    on=["sensor_id", "norad_id", "pass_start"], how="left_anti")
    gone = gone.select(*[f.name for f in schemas.PASSES.fields], F.lit("delete").alias("action"))
    return recomputed.unionByName(gone)
