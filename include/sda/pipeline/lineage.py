"""``sda trace ALERT_ID``: what an alert came from, by the ids carried from source to sink.

    alert (gold.alerts / alert_events)
      -> the conjunction it was raised from (gold.conjunctions, by event_id: pair, TCA, screening run)
      -> per object, the orbit the alert used (its ``*_cov_source``): a fused orbit (gold.fused_orbits, by
         fused_id: window, fit, and the correlated observations it was fitted to) or the catalogue's
         element set with the modelled covariance (:mod:`sda.pipeline.lineage_fused`)
      -> per object, the catalogue state the screening used: the newest element set (gold.catalog)
         loaded before that screening finished, and the newest per-object state window (gold.object_state)
         starting before the screening -- the residuals behind the covariance of the Pc
      -> the observations correlated with each object by the correlate runs that had finished when
         the screening ran (gold.correlated, ops.run_metrics)
      -> their bronze records (bronze_id -> source_file, record_no, ingest batch)
      -> the landing files (ops.ingested_files: path, sha256, size, the run that ingested it)

Every hop is a key lookup: obs_id and bronze_id travel with each row from bronze to gold, and the
bronze_id is sha256(landing file sha256, record number), so a record can be found again in its file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sda.lake.tables import BRONZE_BY_KIND, TABLES
from sda.pipeline.lineage_fused import orbit_used, render_orbit

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings


class TraceError(LookupError):
    pass


def _rows(df) -> list[dict[str, Any]]:
    return [r.asDict() for r in df.collect()]


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
    found = _rows(cat.withColumn("_rank", F.row_number().over(newest)).where(F.col("_rank") == 1).select(
        "norad_id", "name", "epoch", "line1", "line2", "source", "load_time", "run_id"))
    return {int(r["norad_id"]): r for r in found}


def trace(spark: "SparkSession", settings: "Settings", alert_id: str, limit: int = 20) -> dict[str, Any]:
    """Every hop of an alert's lineage (see the module docstring), as plain rows; :func:`render` prints it.
    ``limit``: the fitted observations listed per fused orbit (all are counted)."""
    from pyspark.sql import functions as F

    c = F.col
    alert = _rows(TABLES["alerts"].read(spark, settings).where(c("alert_id") == alert_id))
    if not alert:
        known = [r["alert_id"] for r in TABLES["alerts"].read(spark, settings).select("alert_id").limit(5).collect()]
        raise TraceError(f"no alert {alert_id!r} in gold.alerts"
                         + (f" (some alert ids: {', '.join(known)})" if known else " (the table is empty)"))
    alert = alert[0]
    versions = _rows(TABLES["alert_events"].read(spark, settings).where(c("alert_id") == alert_id)
                     .select("version", "status", "level", "event_id", "run_id", "cdm_file").orderBy("version"))
    event_ids = sorted({alert["event_id"], alert_id, *[v["event_id"] for v in versions]})
    events = _rows(TABLES["conjunctions"].read(spark, settings).where(c("event_id").isin(event_ids))
                   .select("event_id", "primary_id", "secondary_id", "screen_start", "tca", "miss_m", "pc", "level",
                           "run_id"))
    current = next((e for e in events if e["event_id"] == alert["event_id"]), None)
    screened_by = current["run_id"] if current else alert.get("first_run_id")
    finished = (TABLES["run_metrics"].read(spark, settings)
                .where((c("stage") == "conjunction") & (c("run_id") == screened_by)).select("finished").collect())
    used_before = finished[0]["finished"] if finished else None

    # the correlate runs that had finished when the screening did: what the screening could know
    known_runs = None
    if used_before is not None:
        known_runs = [r["run_id"] for r in TABLES["run_metrics"].read(spark, settings)
                      .where((c("stage") == "correlate") & (c("finished") <= F.lit(used_before)))
                      .select("run_id").collect()]
    objects = {role: _object_lineage(spark, settings, norad, alert["screen_start"], used_before, known_runs)
               for role, norad in (("primary", alert["primary_id"]), ("secondary", alert["secondary_id"]))}
    for role, obj in objects.items():
        obj["orbit_used"] = orbit_used(spark, settings, alert.get(f"{role[0]}_cov_source"), limit)

    bronze = _bronze_records(spark, settings, {o["bronze_id"] for obj in objects.values() for o in obj["observations"]})
    landing = _landing_files(spark, settings, sorted({b["source_file"] for b in bronze}))
    return {"alert": {k: alert[k] for k in ("alert_id", "version", "status", "level", "primary_id", "secondary_id",
                                             "tca", "miss_m", "pc", "screen_start", "first_run_id", "event_id",
                                             "p_cov_source", "s_cov_source")},
            "versions": versions, "conjunctions": sorted(events, key=lambda e: e["screen_start"]),
            "screened_by_run": screened_by, "objects": objects, "bronze": bronze, "landing_files": landing}


def _object_lineage(spark: "SparkSession", settings: "Settings", norad: int, screen_start: dt.datetime,
                    used_before: dt.datetime | None, known_runs: list[str] | None) -> dict[str, Any]:
    """One object of the pair: the element set the screening used, its newest state window starting before
    the screening, and its observations correlated by ``known_runs`` (all runs when None)."""
    from pyspark.sql import functions as F

    c = F.col
    element_set = element_set_used(spark, settings, norad, used_before)
    state = _rows(TABLES["object_state"].read(spark, settings)
                  .where((c("norad_id") == norad) & (c("window_start") <= F.lit(screen_start)))
                  .orderBy(c("window_start").desc()).limit(1)
                  .select("window_start", "window_end", "observations", "residual_rms_m", "last_observed", "final",
                          "run_id"))
    obs = TABLES["correlated"].read(spark, settings).where(c("norad_id") == norad)
    if known_runs is not None:
        obs = obs.where(c("correlate_run_id").isin(known_runs))
    obs = (obs
           .select("obs_id", "sensor_id", "sensor_kind", "event_time", "residual_m", "bronze_id", "correlate_run_id")
           .orderBy("event_time"))
    return {"norad_id": norad, "element_set": element_set,
            "state_window": state[0] if state else None, "observations": _rows(obs)}


def _bronze_records(spark: "SparkSession", settings: "Settings", bronze_ids: set[str]) -> list[dict[str, Any]]:
    """The bronze rows of the observations, in (source file, record number) order."""
    from pyspark.sql import functions as F

    bronze: list[dict[str, Any]] = []
    if bronze_ids:
        ids = spark.createDataFrame([(b,) for b in sorted(bronze_ids)], "bronze_id string")
        for spec in BRONZE_BY_KIND.values():
            bronze += _rows(spec.read(spark, settings).join(F.broadcast(ids), "bronze_id", "left_semi")
                            .select("bronze_id", "sensor_kind", "source_file", "record_no", "ingest_batch", "run_id"))
    bronze.sort(key=lambda r: (r["source_file"], r["record_no"]))
    return bronze


def _landing_files(spark: "SparkSession", settings: "Settings", files: list[str]) -> list[dict[str, Any]]:
    """The ledger rows of the landing files the bronze records came from."""
    from pyspark.sql import functions as F

    if not files:
        return []
    return _rows(TABLES["ingested_files"].read(spark, settings).where(F.col("file_path").isin(files))
                 .select("file_path", "file_sha256", "file_size", "sensor_kind", "records", "run_id", "batch_id")
                 .orderBy("file_path"))


def render(result: dict[str, Any], limit: int = 20) -> str:
    a = result["alert"]
    out = [f"alert {a['alert_id']} v{a['version']} {a['status']} {a['level']}: "
           f"{a['primary_id']} x {a['secondary_id']}, TCA {a['tca']}, miss {a['miss_m']:.0f} m, Pc {a['pc']}",
           f"  screened from {a['screen_start']} by run {result['screened_by_run']}; "
           f"{len(result['conjunctions'])} screening row(s), {len(result['versions'])} emitted version(s)"]
    for role, obj in result["objects"].items():
        es, st = obj["element_set"], obj["state_window"]
        out.append(f"{role} {obj['norad_id']}" + (f" {es['name']}" if es and es.get("name") else ""))
        if obj.get("orbit_used"):
            out += render_orbit(obj["orbit_used"], limit)
        if es:
            out.append(f"  catalogue state: element set epoch {es['epoch']} from {es['source']} "
                       f"(loaded {es['load_time']}, run {es['run_id']})")
            out += [f"    {es['line1']}", f"    {es['line2']}"]
        else:
            out.append("  catalogue state: no element set found")
        if st:
            out.append(f"  state window {st['window_start']} .. {st['window_end']}: {st['observations']} observations, "
                       f"residual RMS {st['residual_rms_m']:.0f} m, final={st['final']}")
        obs = obj["observations"]
        shown = f" (last {min(limit, len(obs))} shown)" if len(obs) > limit else ""
        out.append(f"  observations correlated before the screening ran: {len(obs)}{shown}")
        for o in obs[-limit:]:
            out.append(f"    {o['event_time']} {o['sensor_id']:<14} obs {o['obs_id'][:16]} "
                       f"residual {o['residual_m']:.0f} m  bronze {o['bronze_id'][:16]}")
    out.append(f"bronze records: {len(result['bronze'])} in {len(result['landing_files'])} landing file(s)")
    for f in result["landing_files"]:
        n = sum(1 for b in result["bronze"] if b["source_file"] == f["file_path"])
        out.append(f"  {f['file_path']}  sha256 {f['file_sha256'][:16]}  {f['file_size']} B  "
                   f"{n} of its {f['records']} records  (ingest run {f['run_id']})")
    return "\n".join(out)


def main(args: argparse.Namespace) -> int:
    from sda.config.settings import load_settings
    from sda.lake.spark import build_session

    settings = load_settings()
    spark = build_session("sda-trace", settings)
    try:
        result = trace(spark, settings, args.alert_id, args.limit)
    except TraceError as exc:
        print(f"sda trace: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, indent=2,
                         default=lambda v: v.isoformat() if isinstance(v, (dt.datetime, dt.date)) else str(v)))
    else:
        print(render(result, args.limit))
    spark.stop()
    return 0
