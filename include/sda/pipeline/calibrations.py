"""Gold ``sensor_calibrations``: each sensor's biases per event-time arc window, estimated by the fuse stage
from its well-determined fits' residuals and applied by it to the windows after
(:mod:`sda.orbit.estimation.calibration` says how).

**Written** (:func:`refresh`) after the fused orbits: for every window a run refitted, the sum of the
``calibration_json`` contributions of *all* that window's fused orbits (not only the run's), solved and MERGEd on
(sensor_id, window_start, quantity); a key no longer estimated is deleted. A window's calibrations are therefore
a function of its fused orbits whatever the run split. **Read** (:func:`lookup`) before the fits: the
calibrations of the windows up to :data:`sda.orbit.estimation.calibration.MAX_AGE_WINDOWS` before the first
window refitted. Caveat: a window refitted after a late observation changes its calibrations, and with them
what the next window's fits would have applied; the other objects' later windows are refitted only when their
own observations change.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from sda.lake.tables import TABLES, add_missing_columns, table_exists
from sda.orbit.estimation import calibration
from sda.pipeline import sinks

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings

TABLE = "sensor_calibrations"


def _utc(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc)


def lookup(spark: "SparkSession", settings: "Settings", first_k: int, arc_s: float) -> dict:
    """The calibrations the fits of windows from ``first_k`` on may apply (:func:`calibration.lookup`); also brings
    an older ``fused_orbits`` up to its schema (the ``calibration_json`` column)."""
    from pyspark.sql import functions as F

    if table_exists("fused_orbits", settings):
        add_missing_columns(spark, settings, "fused_orbits")
    if not table_exists(TABLE, settings):
        return {}
    lo = _utc((first_k - calibration.MAX_AGE_WINDOWS) * arc_s)
    rows = (TABLES[TABLE].read(spark, settings).where(F.col("window_start") >= F.lit(lo))
            .select("sensor_id", (F.unix_micros("window_start") / 1e6).alias("window_start_unix"), "quantity",
                    "bias", "sigma")
            .collect())
    return calibration.lookup([r.asDict() for r in rows], arc_s)


def refresh(spark: "SparkSession", settings: "Settings", windows: list[int], arc_s: float,
            run_id: str) -> dict[str, Any]:
    """Re-estimate the calibrations of the arc windows ``windows`` (indices) from their fused orbits (module
    docstring); returns the run's figures."""
    from pyspark.sql import functions as F

    if not windows:
        return {"calibrations": 0}
    starts = [_utc(k * arc_s) for k in sorted(set(windows))]
    rows = (TABLES["fused_orbits"].read(spark, settings)
            .where(F.col("window_start").isin(starts) & F.col("calibration_json").isNotNull())
            .select(F.unix_micros("window_start").alias("us"), "calibration_json").collect())
    per_window: dict[int, list[str]] = {}
    for r in rows:
        per_window.setdefault(round(r["us"] / 1e6 / arc_s), []).append(r["calibration_json"])
    now = dt.datetime.now(dt.timezone.utc)
    out = []
    for k, texts in sorted(per_window.items()):
        out += [(e["sensor_id"], _utc(k * arc_s), _utc((k + 1) * arc_s), e["quantity"], e["bias"], e["sigma"],
                 e["n_obs"], e["n_objects"], run_id, now) for e in calibration.solve(sorted(texts))]
    spec = TABLES[TABLE]
    fresh = {(r[0], r[1], r[3]) for r in out}
    stale = []
    if table_exists(TABLE, settings):
        stale = [(r["sensor_id"], r["window_start"], r["quantity"]) for r in spec.read(spark, settings)
                 .where(F.col("window_start").isin(starts)).select("sensor_id", "window_start", "quantity").collect()
                 if (r["sensor_id"], r["window_start"].astimezone(dt.timezone.utc), r["quantity"]) not in fresh]
    if out:
        sinks.upsert(spark, spark.createDataFrame(out, spec.schema), TABLE, settings, unique=True)
    if stale:
        sinks.delete_keys(spark, spark.createDataFrame(stale, "sensor_id string, window_start timestamp, "
                                                              "quantity string"), TABLE, settings)
    return {"calibrations": len(out), "calibrations_deleted": len(stale)}


def current(spark: "SparkSession", settings: "Settings") -> list[dict]:
    """Each sensor's newest window's calibrations (what the run report lists), by sensor and quantity."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not table_exists(TABLE, settings):
        return []
    newest = F.max("window_start").over(Window.partitionBy("sensor_id"))
    rows = (TABLES[TABLE].read(spark, settings).withColumn("newest", newest)
            .where(F.col("window_start") == F.col("newest"))
            .select("sensor_id", "window_start", "quantity", "bias", "sigma", "n_obs", "n_objects")
            .orderBy("sensor_id", "quantity").collect())
    return [r.asDict() for r in rows]
