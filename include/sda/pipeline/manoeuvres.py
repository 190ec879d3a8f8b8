"""The fuse stage's manoeuvre outputs: held observations in, detected manoeuvres and re-associations out.

* **Held observations** (:func:`held_touched`, :func:`held_observations`): gold ``uncorrelated`` rows
  with no catalogue object inside their gate that name one as nearest (``nearest_norad_id``) are that
  object's *candidates*: the fit tests them against its fused prediction (:mod:`sda.orbit.manoeuvre.segments`).
  A manoeuvred object's observations leave the catalogue's gate, so they are found here. A new such row
  touches its object's window, as a correlated one does.
* **Manoeuvres** (:func:`manoeuvre_rows`, :func:`write_manoeuvres`): gold ``manoeuvres`` holds each
  refitted window's detections, upserted on (norad_id, window_start, seq); a window refitted with fewer
  detections than before loses the rest (the same observations give the same rows: replays and run
  splits agree).
* **Re-association** (:func:`reassociate`): the held observations a fit explained move from
  ``uncorrelated`` to ``correlated`` (insert-if-new, then delete): the correlated row carries the
  catalogue's miss and gate statistic it was held with, one candidate (the object whose fused
  prediction explains it), and ``correlate_run_id`` ``reassociated:<the
  run that held it>``. Such a row stays a candidate of the fit (read with ``candidate`` true), so a
  window's fit is a function of the same observations whichever table they sit in; one that a later
  fit of its window no longer accepts moves back, restored as it was. The tables therefore end the
  same whatever the run split. A crash between insert and delete leaves a row in both; the fit reads
  each obs_id once, and the next run finishes the move. A move is a change of ``correlated``, so the
  next run refits the window with the same observations and finds the same orbit: a fixed point.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING

from sda.lake import schemas
from sda.lake.schemas import MANOEUVRES
from sda.lake.tables import TABLES, table_exists
from sda.orbit.correlation import REASON_NO_CANDIDATE
from sda.orbit.times import as_utc, utc
from sda.pipeline import sinks

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from sda.config.settings import Settings

MANOEUVRE_FIELDS = [f.name for f in MANOEUVRES.fields]
#: ``correlate_run_id`` of a row this stage moved to ``correlated``: then the run that held it
PREFIX = "reassociated:"
_TIMES = ("burn_after", "burn_before", "burn_time", "detected_at")


def held_only(uncorrelated: "DataFrame") -> "DataFrame":
    """Rows held for want of a catalogue object inside the gate that name their nearest object."""
    from pyspark.sql import functions as F

    return uncorrelated.where(F.col("nearest_norad_id").isNotNull() & (F.col("reason") == F.lit(REASON_NO_CANDIDATE)))


def arc_window(arc_s: float):
    """The arc window index of a row's ``event_time`` (a column named ``k``)."""
    from pyspark.sql import functions as F

    return F.floor(F.unix_micros("event_time") / F.lit(arc_s * 1e6)).cast("long").alias("k")


def held_touched(changes: "DataFrame", arc_s: float) -> list[tuple[int, int]]:
    """(nearest norad_id, window index) of the new held rows."""
    from pyspark.sql import functions as F

    rows = (held_only(changes).select(F.col("nearest_norad_id").alias("norad_id"), arc_window(arc_s))
            .distinct().collect())
    return [(int(r["norad_id"]), int(r["k"])) for r in rows]


def held_observations(spark: "SparkSession", settings: "Settings", keys: "DataFrame", lo: dt.datetime,
                      columns) -> "DataFrame":
    """The held rows of the objects in ``keys`` (norad_id, first_start) from their first refitted window on,
    as that object's rows (``columns``, ``candidate`` true)."""
    from pyspark.sql import functions as F

    held = held_only(TABLES["uncorrelated"].read(spark, settings).where(F.col("event_date") >= F.lit(lo.date())))
    return (held.withColumn("norad_id", F.col("nearest_norad_id")).join(F.broadcast(keys), on="norad_id")
            .where(F.col("event_time") >= F.col("first_start"))
            .select(*columns, F.lit(True).alias("candidate")))


def manoeuvre_rows(written: list, run_id: str) -> list[tuple]:
    """gold ``manoeuvres`` rows (MANOEUVRES order) of the written fused rows' ``manoeuvres_json``."""
    out = []
    for r in written:
        for m in json.loads(r["manoeuvres_json"] or "[]"):
            row = {**m, "norad_id": int(r["norad_id"]), "window_start": utc(r["us"] / 1e6),
                   "fused_id": r["fused_id"], "regime": r["regime"], "run_id": run_id}
            for name in _TIMES:
                row[name] = utc(m[f"{name}_unix"])
            out.append(tuple(row.get(name) for name in MANOEUVRE_FIELDS))
    return out


def write_manoeuvres(spark: "SparkSession", settings: "Settings", written: list, run_id: str) -> dict[str, int]:
    """Upsert the refitted windows' detections and delete the ones they no longer have."""
    from pyspark.sql import functions as F

    rows = manoeuvre_rows(written, run_id)
    new_keys = {(r[0], r[1], r[2]) for r in rows}
    windows = {(int(r["norad_id"]), utc(r["us"] / 1e6)) for r in written}
    stale: list[tuple] = []
    if windows and table_exists("manoeuvres", settings):
        lo = min(w for _, w in windows)
        ids = sorted({n for n, _ in windows})
        old = (TABLES["manoeuvres"].read(spark, settings).where(F.col("window_start") >= F.lit(lo))
               .where(F.col("norad_id").isin(ids)).select("norad_id", "window_start", "seq").collect())
        stale = [(int(o["norad_id"]), o["window_start"], int(o["seq"])) for o in old
                 if (int(o["norad_id"]), as_utc(o["window_start"])) in windows
                 and (int(o["norad_id"]), as_utc(o["window_start"]), int(o["seq"])) not in new_keys]
    if rows:
        sinks.upsert(spark, spark.createDataFrame(rows, MANOEUVRES), "manoeuvres", settings, unique=True)
    if stale:
        sinks.delete_keys(spark, spark.createDataFrame(stale, "norad_id long, window_start timestamp, seq long"),
                          "manoeuvres", settings)
    return {"manoeuvres": len(rows), "manoeuvres_withdrawn": len(stale)}


def is_reassociated(column: str = "correlate_run_id"):
    """A correlated row this stage moved there (its ``correlate_run_id`` carries :data:`PREFIX`)."""
    from pyspark.sql import functions as F

    return F.col(column).startswith(PREFIX)


def move_held(spark: "SparkSession", settings: "Settings", target: "DataFrame", lo: dt.datetime, prefix: str) -> int:
    """Move the held observations of ``target`` (obs_id, fitted_norad_id; event time from ``lo`` on) from
    ``uncorrelated`` to ``correlated`` under ``fitted_norad_id`` (insert-if-new, then delete): the row keeps the
    miss and gate statistic it was held with, one candidate, and ``correlate_run_id`` ``<prefix><the run that
    held it>``. Returns how many moved."""
    from pyspark.sql import functions as F

    held = (TABLES["uncorrelated"].read(spark, settings).where(F.col("event_date") >= F.lit(lo.date()))
            .join(F.broadcast(target), on="obs_id"))
    residuals = [f.name for f in schemas.CORRELATED.fields if f.name.startswith("residual_") and f.name != "residual_m"]
    into = held.select(
        *[f.name for f in schemas.DEDUPED.fields], F.col("fitted_norad_id").alias("norad_id"),
        F.coalesce("nearest_residual_m", F.lit(float("nan"))).alias("residual_m"), F.lit(1).alias("candidates"),
        F.lit(False).alias("ambiguous"), F.concat(F.lit(prefix), "correlate_run_id").alias("correlate_run_id"),
        F.col("nearest_gate_d2").alias("gate_d2"), *[F.lit(None).cast("double").alias(c) for c in residuals],
    ).localCheckpoint()
    n_in = into.count()
    if n_in:
        sinks.merge_new(spark, into, "correlated", settings, unique=True)
        sinks.delete_keys(spark, into.select("obs_id", "event_date"), "uncorrelated", settings)
    return n_in


def reassociate(spark: "SparkSession", settings: "Settings", accepted: list[tuple[str, int]], keys: "DataFrame",
                lo: dt.datetime) -> dict[str, int]:
    """Make ``correlated`` hold exactly the held observations the refitted windows' fits accepted
    (``accepted``: obs_id, norad_id): the new ones move in from ``uncorrelated``, the ones moved in before
    that the fits no longer accept move back (module docstring)."""
    from pyspark.sql import functions as F

    moved = (TABLES["correlated"].read(spark, settings).where(F.col("event_date") >= F.lit(lo.date()))
             .where(is_reassociated()).join(F.broadcast(keys), on="norad_id")
             .where(F.col("event_time") >= F.col("first_start")).drop("first_start"))
    target = spark.createDataFrame(accepted or [], "obs_id string, fitted_norad_id long")
    back = moved.join(F.broadcast(target), on="obs_id", how="left_anti").localCheckpoint()
    n_back = back.count()
    if not accepted and not n_back:  # the usual run: nothing to move either way, one small read
        return {"reassociated": 0, "reassociation_withdrawn": 0}
    n_in = move_held(spark, settings, target, lo, PREFIX)
    if n_back:
        restored = back.select(
            *[f.name for f in schemas.DEDUPED.fields], F.lit(REASON_NO_CANDIDATE).alias("reason"),
            F.col("norad_id").alias("nearest_norad_id"), F.col("residual_m").alias("nearest_residual_m"),
            F.expr(f"substring(correlate_run_id, {len(PREFIX) + 1})").alias("correlate_run_id"),
            F.col("gate_d2").alias("nearest_gate_d2"))
        sinks.merge_new(spark, restored, "uncorrelated", settings, unique=True)
        sinks.delete_keys(spark, back.select("obs_id", "event_date"), "correlated", settings)
    return {"reassociated": n_in, "reassociation_withdrawn": n_back}
