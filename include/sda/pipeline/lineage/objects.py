"""``sda trace``'s object hop: per object of an alert's pair, the catalogue state the screening used -- the
newest element set (gold ``catalog``) loaded before the screening finished, the newest per-object state window
(gold ``object_state``) starting before it (the residuals behind the covariance of the Pc), and the observations
correlated with the object by the correlate runs that had finished by then (gold ``correlated``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sda.lake.tables import TABLES, table_exists

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings


def element_set_used(spark: "SparkSession", settings: "Settings", norad_id: int,
                     used_before: dt.datetime | None) -> dict[str, Any] | None:
    """The element set a screening finished at ``used_before`` used for an object: the newest epoch
    among those loaded by then (the newest of all when ``used_before`` is None)."""
    return element_sets_used(spark, settings, [norad_id], used_before).get(int(norad_id))


def element_sets_used(spark: "SparkSession", settings: "Settings", norad_ids: "Iterable[int]",
                      used_before: dt.datetime | None) -> dict[int, dict[str, Any]]:
    """:func:`element_set_used` for many objects in one query: norad_id -> element set (objects with
    none loaded by then are absent)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ids = sorted({int(n) for n in norad_ids})
    if not ids:
        return {}
    cat = TABLES["catalog"].read(spark, settings).where(F.col("norad_id").isin(ids))
    if used_before is not None:
        cat = cat.where(F.col("load_time") <= F.lit(used_before))
    newest = Window.partitionBy("norad_id").orderBy(F.col("epoch").desc())
    found = cat.withColumn("_rank", F.row_number().over(newest)).where(F.col("_rank") == 1).select(
        "norad_id", "name", "epoch", "line1", "line2", "source", "load_time", "run_id").collect()
    return {int(r["norad_id"]): r.asDict() for r in found}


def object_lineage(spark: "SparkSession", settings: "Settings", norad: int, screen_start: dt.datetime,
                   used_before: dt.datetime | None, known_runs: list[str] | None) -> dict[str, Any]:
    """One object of the pair: the element set the screening used, its newest state window starting before
    the screening, and its observations correlated by ``known_runs`` (all runs when None)."""
    from pyspark.sql import functions as F

    c = F.col
    element_set = element_set_used(spark, settings, norad, used_before)
    state = (TABLES["object_state"].read(spark, settings)
             .where((c("norad_id") == norad) & (c("window_start") <= F.lit(screen_start)))
             .orderBy(c("window_start").desc()).limit(1)
             .select("window_start", "window_end", "observations", "residual_rms_m", "last_observed", "final",
                     "run_id").collect())
    obs = TABLES["correlated"].read(spark, settings).where(c("norad_id") == norad)
    if known_runs is not None:  # a row re-association rewrote keeps the run that first decided it
        obs = obs.where(F.regexp_replace(c("correlate_run_id"), "^gated:", "").isin(known_runs))
    obs = (obs
           .select("obs_id", "sensor_id", "sensor_kind", "event_time", "residual_m", "bronze_id", "correlate_run_id")
           .orderBy("event_time"))
    return {"norad_id": norad, "element_set": element_set,
            "state_window": state[0].asDict() if state else None,
            "observations": [r.asDict() for r in obs.collect()], "moves": moves(spark, settings, norad)}


def moves(spark: "SparkSession", settings: "Settings", norad: int) -> list[dict[str, Any]]:
    """The re-association's moves of observations to or from the object (gold ``reassociations``), in time order."""
    from pyspark.sql import functions as F

    if not table_exists("reassociations", settings):
        return []
    rows = (TABLES["reassociations"].read(spark, settings)
            .where((F.col("to_norad_id") == norad) | (F.col("from_norad_id") == norad))
            .select("obs_id", "event_time", "from_status", "from_norad_id", "to_status", "to_norad_id", "round",
                    "reason", "run_id").orderBy("event_time", "obs_id", "run_id"))
    return [r.asDict() for r in rows.collect()]
