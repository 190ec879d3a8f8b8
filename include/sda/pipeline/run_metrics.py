"""A stage run's figures: the conservation check, ``ops.run_metrics``, upstream lag, the summary line.

Every stage returns its counts (``records_in`` = ``records_out`` + ``quarantined`` + ``duplicates``
+ ``late``); :func:`sda.pipeline.runtime.run_stage` adds how far behind its inputs the stage started
(:func:`upstream_lag`), records the whole in ``ops.run_metrics`` (:func:`record_run_metrics`, a
retry replaces its row) and refuses to commit progress when the equation does not hold
(:class:`ConservationError`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from sda.config.settings import Settings
from sda.lake.spark import temporary_conf
from sda.lake.tables import TABLES
from sda.pipeline.arguments import parse_instant
from sda.pipeline.changefeed import consumed_versions, history
from sda.pipeline.sinks import write_rows

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession


class ConservationError(RuntimeError):
    """A stage's figures do not add up: something was lost or counted twice."""


COUNTS = ("records_in", "records_out", "quarantined", "duplicates", "late")
LAG_HISTORY = 100  # commits read to date the oldest unconsumed one; more behind than that reads all


def conservation_holds(metrics: dict[str, Any]) -> bool | None:
    """in == out + quarantined + duplicates + late, or None when the stage does not count records."""
    if not all(k in metrics for k in COUNTS[:4]):
        return None
    accounted = metrics["records_out"] + metrics["quarantined"] + metrics["duplicates"] + metrics.get("late", 0)
    return metrics["records_in"] == accounted


def record_run_metrics(spark: "SparkSession", settings: Settings, stage: str, args: argparse.Namespace,
                       metrics: dict[str, Any]) -> bool | None:
    """Write the run's figures to ``ops.run_metrics`` (a retry replaces its row) and return whether
    the conservation equation holds."""
    conserved = conservation_holds(metrics)
    counts = [int(metrics[k]) if k in metrics else None for k in COUNTS]
    watermark = metrics.get("watermark")
    if isinstance(watermark, str):
        watermark = parse_instant("watermark", watermark)
    lag_s = metrics.get("lag_seconds")
    row = (stage, args.run_id, args.start, args.end, dt.datetime.now(dt.timezone.utc), float(metrics["seconds"]),
           *counts, conserved, json.dumps(metrics, default=str, sort_keys=True),
           metrics.get("mode", "incremental"), watermark,
           None if metrics.get("lag_versions") is None else int(metrics["lag_versions"]),
           None if lag_s is None else float(lag_s))
    # a lakehouse made before the mode/watermark/lag columns existed gains them with this write
    with temporary_conf(spark, "spark.databricks.delta.schema.autoMerge.enabled", "true"):
        write_rows(spark, [row], "run_metrics", settings)
    return conserved


def upstream_lag(spark: "SparkSession", stage: str, settings: Settings,
                 consumed: dict[str, int] | None = None, latest: dict[str, int] | None = None) -> dict[str, Any]:
    """How far behind its inputs the stage is as it starts, over the tables it consumes through the
    change feed (its ``ops.progress`` rows): ``lag_versions``, the Delta commits not yet consumed
    (versions are consecutive: the table's version minus the one consumed), and ``lag_seconds``, the
    age of the oldest of them (0 when it is up to date). A stage that has no progress row yet (first
    run, or no feed input) reports nothing. One ``DESCRIBE HISTORY ... LIMIT`` per input table; each table's
    newest version is left in ``latest`` when given, where the stage's change-feed read takes it
    (:func:`sda.pipeline.changefeed.changes_for`) instead of reading the history again."""
    consumed = consumed_versions(spark, settings, stage) if consumed is None else consumed
    if not consumed:
        return {}
    from concurrent.futures import ThreadPoolExecutor

    versions, oldest = 0, None
    per_table: dict[str, int] = {}
    inputs = sorted((t, v) for t, v in consumed.items() if t in TABLES)
    with ThreadPoolExecutor(max_workers=4) as pool:  # one history read per input, in flight together
        recents = list(pool.map(lambda t: history(spark, t, settings, limit=LAG_HISTORY).select("version", "timestamp")
                                .collect(), [t for t, _ in inputs]))
    for (table, version), recent in zip(inputs, recents):
        newest = max((int(r["version"]) for r in recent), default=version)
        if recent and latest is not None:
            latest[table] = newest
        behind = max(0, newest - version)
        per_table[table] = behind
        versions += behind
        if not behind:
            continue
        unread = [r["timestamp"] for r in recent if int(r["version"]) > version]
        if len(unread) < behind:  # further behind than the commits read: date it from the whole history
            unread = [r["timestamp"] for r in history(spark, table, settings).where(f"version > {int(version)}")
                      .select("timestamp").collect()]
        if unread:
            t = min(unread).astimezone(dt.timezone.utc)
            oldest = t if oldest is None or t < oldest else oldest
    seconds = 0.0 if oldest is None else max(0.0, (dt.datetime.now(dt.timezone.utc) - oldest).total_seconds())
    return {"lag_versions": versions, "lag_seconds": round(seconds, 1), "lag_by_table": per_table}


def summary_line(metrics: dict[str, Any]) -> str:
    """The short human summary a task log ends with."""
    parts = [f"{metrics['stage']} {metrics.get('mode', 'incremental')} run {metrics['run_id']}:"]
    for key in COUNTS:
        if key in metrics:
            parts.append(f"{key.replace('records_', '')}={metrics[key]}")
    if metrics.get("watermark"):
        parts.append(f"watermark={metrics['watermark']}")
    if metrics.get("lag_versions") is not None:
        parts.append(f"lag={metrics['lag_versions']} versions/{metrics.get('lag_seconds') or 0:.0f} s")
    parts.append(f"in {metrics['seconds']:.1f} s")
    return " ".join(parts)
