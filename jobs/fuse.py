"""Stage ``fuse``: gold ``correlated`` -> gold ``fused_orbits`` (orbit determination, keyed by object).

    python jobs/fuse.py --start ISO --end ISO --run-id ID [--replay]

For each object with new (or withdrawn) correlated observations, the orbit is fitted to its radar,
optical and ISL observations together, weighted by each sensor's noise from the sensor registry, with
outlier editing, over event-time arc windows of ``settings.fusion_arc_h``; each window's prior is the
object's previous converged fused orbit, or the catalogue's element set (:mod:`sda.orbit.fusion.arcs` says
how, and why the result does not depend on the run split). The edge into the fit is keyed by
``norad_id`` (a hash shuffle; ``applyInPandas``, one group per object), one keyed pass per window the run
refits (below), objects spread over the tasks.

**What a run refits.** The windows its changes fall in and every later window of the same objects (a
window's prior is the window before it): the objects' correlated observations from the earliest touched
window on are read back from gold (partition pruning by ``event_date``). The rows are upserted on
(norad_id, window_start); a window left without observations (dedup withdrew them) is deleted. A
replay refits the windows its range touches, and the later ones, the same way. A retried run finds the
same changes (its progress is committed last) and writes the same rows.

**Window by window.** A window's sensor calibrations (:mod:`sda.pipeline.calibrations`) are estimated from all
objects' fits of that window and applied to the later windows' fits, so a run fits in event-time order: every
object's window ``k`` (one keyed pass, each prior the object's orbit of an earlier window, read back from gold),
window ``k``'s calibrations re-estimated, then window ``k + 1`` with them. A run over two windows thus fits the
second as a run split at their boundary does (the same input gives the same output, whatever the run split).
Manoeuvres and the held observations' re-associations are written once, after the last window.

**Passes left waiting.** A window's fit leaves out a last pass that fails alone (the next pass confirms a burn or
not: :mod:`sda.orbit.manoeuvre.detection`); window ``k`` reads each object's correlated rows after its prior's
epoch that are before ``k`` (:func:`waiting_rows`) and tests and fits them first.

**Decided again before each fit** (:mod:`sda.pipeline.reassociation`): before window ``k`` is fitted, its
observations are decided again against the fused orbits of the windows before it, and the ones no gate took against
every element set with a wider gate (all of them when one of those fits was written in this run, else the ones new
in this run); the objects that gained or lost observations join
the run from window ``k`` on. A run visits the windows with new rows and up to four windows after any it wrote.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import math
import sys
from typing import TYPE_CHECKING, Any

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sda.lake import schemas
from sda.lake.tables import TABLES
from sda.orbit.estimation.measurements import FIT_COLUMNS
from sda.orbit.sensors import load_sensors
from sda.pipeline import calibrations, changefeed, faults, reassociation, runtime, sinks, space_weather
from sda.pipeline import manoeuvres as manoeuvre_io
from sda.pipeline.arguments import stage_parser, with_defaults

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

    from sda.config.settings import Settings

STAGE = "fuse"
SOURCE = "correlated"
HELD = "uncorrelated"  # held observations naming an object as nearest (sda.pipeline.manoeuvres)
UDF_SCHEMA = T.StructType(schemas.UDF_FIELDS + [T.StructField("manoeuvres_json", T.StringType()),
                                                        T.StructField("reassociated_ids", T.ArrayType(T.StringType()))])
PRIOR_COLUMNS = ("norad_id", "epoch_unix", "fit_start_unix", "x_km", "y_km", "z_km", "vx_kms", "vy_kms", "vz_kms",
                 "b_m2_kg", "covariance", "rms", "iterations", "status", "line1", "line2")


def arc_settings(settings: "Settings"):
    from sda.orbit.estimation import OdConfig
    from sda.orbit.fusion.arcs import ArcSettings

    return ArcSettings(arc_s=settings.fusion_arc_h * 3600.0,
                       lines_span_s=(settings.screening_horizon_h + settings.fusion_arc_h) * 3600.0,
                       lines_min_span_s=settings.fusion_min_span_s,
                       config=OdConfig(light_time=settings.light_time, residuals=True,
                                                       bias_scale=settings.sensor_bias_consider))


def touched_windows(changes: "DataFrame", retracted: "DataFrame", arc_s: float) -> list[tuple[int, int]]:
    """(norad_id, window index) of every changed or withdrawn correlated observation."""
    k = manoeuvre_io.arc_window(arc_s)
    both = changes.select("norad_id", k).unionByName(retracted.select("norad_id", k)).distinct()
    return [(int(r["norad_id"]), int(r["k"])) for r in both.collect()]


def element_sets(spark: "SparkSession", settings: "Settings", ids: list[int]) -> dict[int, list[tuple]]:
    """Every element set of the objects, per object sorted by epoch: (epoch unix, line1, line2)."""
    rows = (TABLES["catalog"].read(spark, settings).where(F.col("norad_id").isin(ids))
            .select("norad_id", F.unix_micros("epoch").alias("us"), "line1", "line2").collect())
    out: dict[int, list[tuple]] = {}
    for r in rows:
        out.setdefault(int(r["norad_id"]), []).append((r["us"] / 1e6, r["line1"], r["line2"]))
    return {n: sorted(v) for n, v in out.items()}


def priors(spark: "SparkSession", settings: "Settings", first: dict[int, int], arc_s: float) -> dict[int, dict]:
    """Per object, its newest converged fused orbit of a window before the first one refitted."""
    from sda.lake.tables import table_exists

    if not first or not table_exists("fused_orbits", settings):
        return {}
    lo = dt.datetime.fromtimestamp((min(first.values()) - 8) * arc_s, dt.timezone.utc)
    keys = spark.createDataFrame([(n, dt.datetime.fromtimestamp(k * arc_s, dt.timezone.utc))
                                  for n, k in first.items()], "norad_id long, first_start timestamp")
    rows = (TABLES["fused_orbits"].read(spark, settings)
            .where((F.col("window_start") >= F.lit(lo)) & (F.col("status") == "converged"))
            .join(F.broadcast(keys), on="norad_id").where(F.col("window_start") < F.col("first_start"))
            .groupBy("norad_id").agg(F.max_by(F.struct(*PRIOR_COLUMNS[1:]), "window_start").alias("p"))
            .select("norad_id", "p.*").collect())
    return {int(r["norad_id"]): r.asDict() for r in rows}


def waiting_rows(spark: "SparkSession", settings: "Settings", prior: dict[int, dict], start: dt.datetime
                 ) -> "DataFrame":
    """Each object's correlated rows after its prior's epoch and before ``start`` (the window fitted), flagged
    ``waiting``: what no converged fit took, for this window to test and fit first
    (:func:`sda.orbit.fusion.arcs.waiting`)."""
    end = int(round(start.timestamp() * 1e6))
    keys = [(n, int(round(p["epoch_unix"] * 1e6)), end) for n, p in prior.items()]
    columns = [*FIT_COLUMNS, manoeuvre_io.is_reassociated().alias("candidate"), F.lit(True).alias("waiting")]
    rows = TABLES["correlated"].read(spark, settings)
    if not keys:
        return rows.where(F.lit(False)).select(*columns)
    lo = dt.datetime.fromtimestamp(min(a for _, a, _ in keys) / 1e6, dt.timezone.utc).date()
    after = spark.createDataFrame(keys, "norad_id long, after_us long, end_us long")
    us = F.unix_micros("event_time")
    return (rows.where(F.col("event_date") >= F.lit(lo)).join(F.broadcast(after), on="norad_id")
            .where((us > F.col("after_us")) & (us < F.col("end_us"))).select(*columns))


def fit_objects(observations: "DataFrame", previous: dict[int, dict], sets: dict[int, list[tuple]],
                sigmas: dict, arc, calibrations: dict | None = None) -> "DataFrame":
    """Keyed by object: each object's windows in ``observations`` fitted in order
    (:func:`sda.orbit.fusion.arcs.fuse_object`; the run passes one window at a time), the observations corrected
    by the sensor calibrations (:func:`sda.orbit.estimation.calibration.apply`)."""
    names = UDF_SCHEMA.fieldNames()

    def fuse(pdf: pd.DataFrame) -> pd.DataFrame:
        import json

        from sda.orbit.estimation.calibration import apply
        from sda.orbit.fusion.arcs import fuse_object
        from sda.orbit.times import unix_seconds

        # an observation re-associated since it was read as held (a crash between the moves) counts once
        pdf = pdf.sort_values(["candidate", "obs_id"], kind="stable").drop_duplicates("obs_id")
        pdf = apply(pdf, calibrations or {}, arc.arc_s)
        norad = int(pdf["norad_id"].iloc[0])
        t_first = float(unix_seconds(pdf["event_time"][~pdf["waiting"].fillna(False)]).min())
        history = sets.get(norad, [])
        usable = [s for s in history if s[0] <= t_first] or history[:1]
        line1, line2 = (usable[-1][1], usable[-1][2]) if usable else (None, None)
        rows = fuse_object(norad, pdf, previous.get(norad), line1, line2, sigmas, arc)
        for r in rows:
            r["manoeuvres_json"] = json.dumps(r["manoeuvres"]) if r["manoeuvres"] else None
        return pd.DataFrame([[r[n] for n in names] for r in rows], columns=names)

    return observations.groupBy("norad_id").applyInPandas(fuse, schema=UDF_SCHEMA)


def with_times(fitted: "DataFrame", run_id: str) -> "DataFrame":
    def ts(c):
        return F.timestamp_micros(F.round(F.col(c) * 1e6).cast("long"))

    return fitted.select(
        *[ts(f"{c}_unix").alias(c) if c in ("window_start", "window_end", "epoch", "fit_start")
          else F.lit(run_id).alias(c) if c == "run_id" else F.col(c)
          for c in schemas.FUSED_ORBITS.fieldNames()], "manoeuvres_json", "reassociated_ids")


def changed_windows(spark: "SparkSession", settings: "Settings", args, arc_s: float):
    """The correlated changes' windows and the held ones' (:mod:`sda.pipeline.manoeuvres`), every new row's
    (obs_id, window) for the re-association, the consumed versions, and whether anything is new."""
    changes, retracted, first_v, last_v = changefeed.net_changes_for(spark, STAGE, SOURCE, settings, args)
    held, _, first_h, last_h = changefeed.net_changes_for(spark, STAGE, HELD, settings, args)
    consumed = {SOURCE: last_v, HELD: last_h}
    if first_v > last_v and first_h > last_h:
        return None, None, None, consumed, False
    own = touched_windows(changes, retracted, arc_s) if first_v <= last_v else []
    others = manoeuvre_io.held_touched(held, arc_s) if first_h <= last_h else []
    k = manoeuvre_io.arc_window(arc_s)
    new = changes.select("obs_id", k).unionByName(held.select("obs_id", k))
    return own, others, new, consumed, True


def run(spark: "SparkSession", settings: "Settings", args: argparse.Namespace) -> dict[str, Any]:
    args = with_defaults(args, parser())
    arc = arc_settings(settings)
    touched, held, new_rows, consumed, new = changed_windows(spark, settings, args, arc.arc_s)
    metrics: dict[str, Any] = {"versions": [consumed[SOURCE], consumed[HELD]], "records_in": 0, "records_out": 0,
                               "quarantined": 0, "duplicates": 0, "objects": 0, "windows": 0}
    if not new:
        return metrics
    rounds = reassociation.Rounds(spark, settings, arc.arc_s, new_rows, args.run_id)
    if not touched and not held and not rounds.new_windows:
        return {**metrics, "consumed": consumed}
    first: dict[int, int] = {}
    for norad, k in touched + held:
        first[norad] = min(k, first.get(norad, k))
    runtime.progress(STAGE, "%d objects with changed observations (%d windows, %d with held ones)", len(first),
                     len(touched), len(held))
    lo = dt.datetime.fromtimestamp(min([*first.values(), *rounds.new_windows]) * arc.arc_s, dt.timezone.utc)
    from sda.orbit.estimation import registry_sigmas

    # the arcs' model error with the Kp landed over them (a storm grows it: sda.orbit.estimation.noise)
    noise = space_weather.process_noise(spark, settings, lo - dt.timedelta(hours=3))
    arc = dataclasses.replace(arc, config=dataclasses.replace(arc.config, noise=noise))
    written, emptied, cal = fit_in_window_order(spark, settings, first, touched, (
        element_sets(spark, settings, sorted(first)), registry_sigmas(load_sensors()), arc), args.run_id, rounds)
    keys = object_keys(spark, first, arc.arc_s)
    done = manoeuvre_io.write_manoeuvres(spark, settings, written, args.run_id)
    faults.checkpoint("fuse:after-manoeuvres")
    accepted = sorted({(i, int(r["norad_id"])) for r in written for i in (r["reassociated_ids"] or [])})
    done.update(manoeuvre_io.reassociate(spark, settings, accepted, keys, lo))
    done.update(cal)
    done["reassociation"] = rounds.figures
    figures = summary(written)
    # conservation counts windows: each one refitted is written, or deleted when it has no observations left
    n = figures["windows"] + len(emptied)
    return {**metrics, **figures, **done, "records_in": n, "records_out": n, "windows_emptied": len(emptied),
            "consumed": consumed}


def object_keys(spark: "SparkSession", first: dict[int, int], arc_s: float) -> "DataFrame":
    """(norad_id, first_start): each object's first window the run refits."""
    return spark.createDataFrame([(n, dt.datetime.fromtimestamp(k * arc_s, dt.timezone.utc)) for n, k in first.items()],
                                 "norad_id long, first_start timestamp")


def observations_of(spark: "SparkSession", settings: "Settings", first: dict[int, int], arc_s: float,
                    k: int | None = None) -> "DataFrame":
    """The objects' correlated rows and held candidates (:mod:`sda.pipeline.manoeuvres`) from their first refitted
    window on (``k``: of that window alone), read from gold, with their window ``k``."""
    keys = object_keys(spark, first, arc_s)
    lo = dt.datetime.fromtimestamp((min(first.values()) if k is None else k) * arc_s, dt.timezone.utc)
    rows = (TABLES["correlated"].read(spark, settings).where(F.col("event_date") >= F.lit(lo.date()))
            .join(F.broadcast(keys), on="norad_id").where(F.col("event_time") >= F.col("first_start"))
            .select(*FIT_COLUMNS, manoeuvre_io.is_reassociated().alias("candidate"))
            .unionByName(manoeuvre_io.held_observations(spark, settings, keys, lo, FIT_COLUMNS)))
    rows = rows.withColumn("k", manoeuvre_io.arc_window(arc_s))
    return rows if k is None else rows.where(F.col("k") == k)


def newest_window(spark: "SparkSession", settings: "Settings", arc_s: float, lo: int) -> int | None:
    """The newest window with observations (correlated or not) from window ``lo`` on."""
    day = dt.datetime.fromtimestamp(lo * arc_s, dt.timezone.utc).date()
    newest = [TABLES[t].read(spark, settings).where(F.col("event_date") >= F.lit(day))
              .agg(F.max(F.unix_micros("event_time"))).first()[0] for t in ("correlated", "uncorrelated")]
    newest = [n for n in newest if n is not None]
    return int(max(newest) // (arc_s * 1e6)) if newest else None


def fit_in_window_order(spark: "SparkSession", settings: "Settings", first: dict[int, int],
                        touched: list[tuple[int, int]], inputs: tuple, run_id: str, rounds) -> tuple[list, list, dict]:
    """Decide again, fit, write and calibrate window after window (module docstring): window ``k``'s rows decided
    again (:class:`sda.pipeline.reassociation.Rounds`), then every refitted object's observations of ``k`` against
    its prior from gold and the calibrations of the windows before ``k``; a touched window left without
    observations is deleted. ``first``: each object's first refitted window (objects that gain or lose
    observations join it). ``inputs``: (element sets, sensor sigmas, arc settings). Returns the rows written, the
    (norad_id, window) keys deleted, and the calibrations' figures."""
    sets, sigmas, arc = inputs
    windows = {w for _, w in touched}
    if first:
        windows |= {int(r["k"]) for r in observations_of(spark, settings, first, arc.arc_s).select("k").distinct()
                    .collect()}
    written: list = []
    emptied: list = []
    cal = {"calibrations": 0, "calibrations_deleted": 0}
    visited: set[int] = set()
    newest = None
    while pending := sorted((windows | rounds.windows(newest)) - visited):
        k = pending[0]
        visited.add(k)
        joined = {n for n in rounds.before_fit(k) if first.get(n, k + 1) > k}
        if joined:
            first.update(dict.fromkeys(joined, k))
            sets.update(element_sets(spark, settings, sorted(joined)))
            windows |= {int(r["k"]) for r in observations_of(spark, settings, dict.fromkeys(joined, k), arc.arc_s)
                        .select("k").distinct().collect()}
        rows_k = fit_window(spark, settings, k, {n: f for n, f in first.items() if f <= k}, inputs, run_id)
        if rows_k:
            rounds.written.add(k)
            newest = newest_window(spark, settings, arc.arc_s, k) if newest is None else newest
        gone = sorted(({n for n, w in touched if w == k} | joined) - {int(r["norad_id"]) for r in rows_k})
        if gone:  # windows whose only observations dedup withdrew or re-association moved
            sinks.delete_keys(spark, spark.createDataFrame(
                [(n, dt.datetime.fromtimestamp(k * arc.arc_s, dt.timezone.utc)) for n in gone],
                "norad_id long, window_start timestamp"), "fused_orbits", settings)
        for name, n in calibrations.refresh(spark, settings, [k], arc.arc_s, run_id).items():
            cal[name] = cal.get(name, 0) + n
        written += rows_k
        emptied += [(n, k) for n in gone]
    return written, emptied, cal


def fit_window(spark: "SparkSession", settings: "Settings", k: int, objects: dict[int, int], inputs: tuple,
               run_id: str) -> list:
    """Fit and write window ``k`` of the ``objects`` (norad_id -> first refitted window) that have observations
    there; returns the rows written."""
    sets, sigmas, arc = inputs
    if not objects:
        return []
    part = observations_of(spark, settings, objects, arc.arc_s, k).drop("k").localCheckpoint()
    present = [int(r["norad_id"]) for r in part.select("norad_id").distinct().collect()]
    if not present:
        return []
    prior = priors(spark, settings, dict.fromkeys(present, k), arc.arc_s)
    start = dt.datetime.fromtimestamp(k * arc.arc_s, dt.timezone.utc)
    part = part.withColumn("waiting", F.lit(False)).unionByName(waiting_rows(spark, settings, prior, start))
    fitted = fit_objects(part, prior, sets, sigmas, arc, calibrations.lookup(spark, settings, k, arc.arc_s))
    rows = with_times(fitted, run_id).localCheckpoint()
    faults.checkpoint("fuse:before-write")
    sinks.upsert(spark, rows, "fused_orbits", settings, unique=True)
    faults.checkpoint("fuse:after-orbits")
    return rows.select("norad_id", F.unix_micros("window_start").alias("us"), "fused_id", "manoeuvres_json",
                       "reassociated_ids", *SUMMARY_COLUMNS).collect()


SUMMARY_COLUMNS = ("regime", "status", "observations", "rms", "sigma_r_m", "sigma_t_m", "sigma_n_m")


def summary(written: list) -> dict[str, Any]:
    """The run's figures from the rows it wrote: windows fitted per status, objects, observations used,
    per regime (and status) the windows, objects, median weighted RMS and median position sigma (m)."""
    from sda.quality.fusion_report import percentile

    groups: dict[tuple, list] = {}
    for r in written:
        groups.setdefault((r["regime"] or "unknown", r["status"]), []).append(r)
    by_status: dict[str, int] = {}
    regimes: dict[str, dict] = {}
    for (regime, status), rs in sorted(groups.items()):
        by_status[status] = by_status.get(status, 0) + len(rs)
        sigma = [math.sqrt(r["sigma_r_m"] ** 2 + r["sigma_t_m"] ** 2 + r["sigma_n_m"] ** 2)
                 if None not in (r["sigma_r_m"], r["sigma_t_m"], r["sigma_n_m"]) else None for r in rs]
        regimes.setdefault(regime, {})[status] = {
            "windows": len(rs), "objects": len({r["norad_id"] for r in rs}),
            "rms_median": percentile([r["rms"] for r in rs], 50), "sigma_median_m": percentile(sigma, 50)}
    return {"observations": int(sum(r["observations"] or 0 for r in written)), "windows": len(written),
            "objects": len({r["norad_id"] for r in written}), "by_status": by_status,
            "converged": by_status.get("converged", 0), "regimes": regimes}


def parser() -> argparse.ArgumentParser:
    return stage_parser(STAGE, "Fit each object's orbit to its correlated observations (orbit determination).")


def main(argv: list[str] | None = None, settings: "Settings | None" = None,
         spark: "SparkSession | None" = None) -> dict[str, Any]:
    return runtime.run_stage(STAGE, argv, run, parser(), settings=settings, spark=spark)


if __name__ == "__main__":
    main(sys.argv[1:])
