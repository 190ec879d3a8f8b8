"""Event-time watermarks and late data, judged by arrival order in the replayable log.

Definitions (all times are event times; a *source* is a sensor):

* Arrival order is the ingest batch (bronze ``ingest_batch``, the ledger's batch number). Every
  observation carries it from bronze on, so every replay of the same bronze sees the same order,
  however the runs after ingest are split and whatever the wall clock says.
* ``seen_s(b)``: the newest event time of sensor ``s`` in batches before ``b`` (``ops.watermarks``
  holds one row per sensor and batch, written by normalize).
* Watermark of a sensor: ``W_s(b) = seen_s(b) - allowed_lateness``.
* Pipeline watermark: ``W(b) = min W_s(b)`` over the *active* sensors, those whose ``seen_s(b)`` is
  within ``idle_source_s`` of the newest sensor's (an idle sensor does not hold windows open for
  ever; the minimum is Spark's default multiple-watermark policy).
* A window ``[start, end)`` is **final** once its watermark passes its end: per-sensor windows
  (dedup windows, a sensor's passes) by ``W_s``, cross-sensor windows (per-object state) by ``W``.
  Before that its result is published *provisional* and replaced when refined.
* An observation of sensor ``s`` arriving in batch ``b`` is **late** when a window it belongs to is
  already final: its dedup window ends at or before ``W_s(b)``, or its state window at or before
  ``W(b)``. It goes to ``ops.late_data`` with its lateness and is counted in the run's ``late``;
  it never changes a final result. Anything less late re-fires the windows it falls in.

Dedup windows nest inside state windows (settings check), so an observation that passes the gate
cannot land in a final state window either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession

    from sda.config.settings import Settings

US = 1_000_000

LOOKUP_SCHEMA = "sensor_id string, ingest_batch long, w_sensor_us long, w_all_us long"


# --- pure rules (unit-tested by hand) ----------------------------------------------------------------

def watermarks_at(seen_us: Mapping[str, int], lateness_s: float, idle_s: float) -> tuple[dict[str, int], int | None]:
    """(W_s per sensor, W) from the newest event time seen per sensor (microseconds)."""
    lateness_us, idle_us = int(round(lateness_s * US)), int(round(idle_s * US))
    per_sensor = {s: t - lateness_us for s, t in seen_us.items()}
    if not seen_us:
        return per_sensor, None
    newest = max(seen_us.values())
    active = [per_sensor[s] for s, t in seen_us.items() if t >= newest - idle_us]
    return per_sensor, min(active)


def window_end_us(t_us: int, window_s: float) -> int:
    w = int(round(window_s * US))
    return (t_us // w + 1) * w


def is_late(t_us: int, w_sensor_us: int | None, w_all_us: int | None, dedup_window_s: float,
            state_window_s: float) -> bool:
    """The rule of the module docstring for one observation (the Spark version is :func:`flag_late`)."""
    if w_sensor_us is not None and window_end_us(t_us, dedup_window_s) <= w_sensor_us:
        return True
    return w_all_us is not None and window_end_us(t_us, state_window_s) <= w_all_us


# --- tables ------------------------------------------------------------------------------------------

def batch_maxima(accepted: "DataFrame", run_id: str) -> "DataFrame":
    """``ops.watermarks`` rows: per sensor and ingest batch, the event-time range that arrived."""
    from pyspark.sql import functions as F

    return accepted.groupBy("sensor_id", "sensor_kind", "ingest_batch").agg(
        F.max("event_time").alias("max_event_time"),
        F.min("event_time").alias("min_event_time"),
        F.count(F.lit(1)).alias("records"),
    ).withColumn("run_id", F.lit(run_id))


def newest_per_sensor(arrivals: list[tuple]) -> dict[str, dict[str, Any]]:
    """``{sensor: {"kind", "newest_unix_s"}}``: the newest event time of each sensor among ``arrivals``
    (``ops.watermarks`` rows as collected, in the table's column order): what the metrics expose."""
    from sda.lake.tables import TABLES

    names = TABLES["watermarks"].schema.fieldNames()
    out: dict[str, dict[str, Any]] = {}
    for row in arrivals:
        r = dict(zip(names, row))
        newest = r["max_event_time"].timestamp()  # collected: naive local time, which timestamp() reads as such
        if r["sensor_id"] not in out or newest > out[r["sensor_id"]]["newest_unix_s"]:
            out[r["sensor_id"]] = {"kind": r["sensor_kind"], "newest_unix_s": newest}
    return out


def seen_before(spark: "SparkSession", settings: "Settings", batches: Iterable[int]) -> dict[int, dict[str, int]]:
    """For each batch b: newest event time (us) per sensor over the batches before b."""
    from pyspark.sql import functions as F

    from sda.lake.tables import TABLES

    batches = sorted({int(b) for b in batches})
    if not batches:
        return {}
    arrivals = TABLES["watermarks"].read(spark, settings).where(F.col("ingest_batch") < max(batches))
    wanted = spark.createDataFrame([(b,) for b in batches], "b long")
    rows = (
        arrivals.join(F.broadcast(wanted), F.col("ingest_batch") < F.col("b"))
        .groupBy("b", "sensor_id")
        .agg(F.max(F.unix_micros("max_event_time")).alias("seen_us"))
        .collect()
    )
    out: dict[int, dict[str, int]] = {b: {} for b in batches}
    for r in rows:
        out[int(r["b"])][r["sensor_id"]] = int(r["seen_us"])
    return out


def lookup(spark: "SparkSession", settings: "Settings", pairs: "DataFrame") -> "DataFrame":
    """(sensor_id, ingest_batch) pairs -> the same plus ``w_sensor_us`` and ``w_all_us`` (null when
    nothing arrived before: no window can be final yet)."""
    distinct = pairs.select("sensor_id", "ingest_batch").distinct().collect()
    wanted = [(r["sensor_id"], int(r["ingest_batch"])) for r in distinct]
    seen = seen_before(spark, settings, {b for _, b in wanted})
    at = {b: watermarks_at(s, settings.allowed_lateness_s, settings.idle_source_s) for b, s in seen.items()}
    rows = [(s, b, at[b][0].get(s), at[b][1]) for s, b in wanted]
    return spark.createDataFrame(rows, LOOKUP_SCHEMA)


def current(spark: "SparkSession", settings: "Settings", through_batch: int) -> tuple[dict[str, int], int | None]:
    """(W_s per sensor, W) once batches up to ``through_batch`` have arrived."""
    seen = seen_before(spark, settings, [through_batch + 1])[through_batch + 1]
    return watermarks_at(seen, settings.allowed_lateness_s, settings.idle_source_s)


# --- the gate, in Spark ------------------------------------------------------------------------------

def _window_end(t_us: "Column", window_s: float) -> "Column":
    from pyspark.sql import functions as F

    w = int(round(window_s * US))
    return (F.floor(t_us / F.lit(w)) + 1).cast("long") * F.lit(w)


def flag_late(observations: "DataFrame", marks: "DataFrame", settings: "Settings") -> "DataFrame":
    """Observations + ``late`` and, for late ones, ``window_end``, ``watermark``, ``lateness_s``.

    ``marks`` is :func:`lookup` output for the observations' (sensor_id, ingest_batch) pairs.
    """
    from pyspark.sql import functions as F

    t_us = F.unix_micros(F.col("event_time"))
    dedup_end, state_end = _window_end(t_us, settings.dedup_window_s), _window_end(t_us, settings.state_window_s)
    by_sensor = F.col("w_sensor_us").isNotNull() & (dedup_end <= F.col("w_sensor_us"))
    by_all = F.col("w_all_us").isNotNull() & (state_end <= F.col("w_all_us"))
    watermark_us = F.when(by_sensor, F.col("w_sensor_us")).otherwise(F.col("w_all_us"))
    lateness_us = int(round(settings.allowed_lateness_s * US))
    return (
        observations.join(F.broadcast(marks), on=["sensor_id", "ingest_batch"], how="left")
        .withColumn("late", F.coalesce(by_sensor | by_all, F.lit(False)))
        .withColumn("window_end", F.timestamp_micros(F.when(by_sensor, dedup_end).otherwise(state_end)))
        .withColumn("watermark", F.timestamp_micros(watermark_us))
        # how far behind the newest event time its watermark was taken from
        .withColumn("lateness_s", (watermark_us + F.lit(lateness_us) - t_us) / F.lit(float(US)))
        .drop("w_sensor_us", "w_all_us")
    )


def window_start(event_time: "Column", window_s: float) -> "Column":
    """Start of the fixed event-time window (aligned on the unix epoch) holding ``event_time``."""
    from pyspark.sql import functions as F

    w = int(round(window_s * US))
    return F.timestamp_micros((F.floor(F.unix_micros(event_time) / F.lit(w))).cast("long") * F.lit(w))

