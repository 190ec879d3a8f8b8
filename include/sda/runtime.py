"""What every stage job shares: its CLI, idempotent Delta sinks and change-feed progress.

A job is ``main(argv)`` -> :func:`run_stage` (parse and validate arguments, build the session,
ensure tables) -> the stage's ``run(spark, settings, args)`` which reads, calls pure transforms, and
writes through the sinks below. Every sink is idempotent, so an Airflow retry of a half-done run
converges to the same tables:

* :func:`merge_new` inserts rows whose key is not in the table yet (MERGE ... WHEN NOT MATCHED);
* :func:`upsert` inserts or replaces rows by key (for state that is refined);
* the change-feed reader :func:`read_changes` returns the upstream rows committed since the version
  this stage last consumed, and :func:`commit_progress` records the new version *after* the writes:
  a crash in between replays the same changes into idempotent sinks.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sda.settings import Settings, SettingsError, load_settings
from sda.tables import TABLES, TableSpec, ensure_tables

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("sda")
RUN_ID_RE = re.compile(r"^[A-Za-z0-9_.:+\-]{1,200}$")


class StageArgumentError(ValueError):
    """A job argument is unusable; the message says which and why."""


def parse_instant(name: str, text: str) -> dt.datetime:
    """An ISO-8601 instant -> aware UTC datetime; naive values are taken as UTC."""
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise StageArgumentError(f"--{name} {text!r}: expected an ISO-8601 time such as 2026-11-21T06:00:00Z") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


def stage_parser(stage: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"jobs/{stage}.py", description=description)
    parser.add_argument("--start", required=True, help="data interval start (ISO-8601, UTC)")
    parser.add_argument("--end", required=True, help="data interval end (ISO-8601, UTC)")
    parser.add_argument("--run-id", required=True, help="the orchestrator's run id (lineage)")
    return parser


def validate_args(args: argparse.Namespace) -> argparse.Namespace:
    args.start = parse_instant("start", args.start)
    args.end = parse_instant("end", args.end)
    if args.end <= args.start:
        raise StageArgumentError(f"--end {args.end.isoformat()} is not after --start {args.start.isoformat()}")
    if not RUN_ID_RE.match(args.run_id):
        raise StageArgumentError(
            f"--run-id {args.run_id!r}: use 1-200 characters from letters, digits and _ . : + -"
        )
    return args


def run_stage(
    stage: str,
    argv: Sequence[str] | None,
    body: Callable[["SparkSession", Settings, argparse.Namespace], dict[str, Any]],
    parser: argparse.ArgumentParser,
    settings: Settings | None = None,
    spark: "SparkSession | None" = None,
) -> dict[str, Any]:
    """Parse and validate, build the session, ensure tables, run ``body``, log a one-line summary.

    Bad arguments exit with status 2 and a message (argparse's convention); bad settings likewise.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        args = validate_args(parser.parse_args(argv))
        settings = settings or load_settings()
    except (StageArgumentError, SettingsError) as exc:
        parser.error(str(exc))
    started = time.monotonic()
    if spark is None:
        from sda.spark import build_session

        spark = build_session(f"sda-{stage}", settings)
    ensure_tables(spark, settings)
    metrics = body(spark, settings, args)
    metrics = {"stage": stage, "run_id": args.run_id, "seconds": round(time.monotonic() - started, 2), **metrics}
    log.info("stage summary %s", json.dumps(metrics, default=str, sort_keys=True))
    print(json.dumps(metrics, default=str, sort_keys=True), file=sys.stdout, flush=True)
    conserved = record_run_metrics(spark, settings, stage, args, metrics)
    if conserved is False:
        raise ConservationError(
            f"{stage} run {args.run_id}: records in ({metrics['records_in']}) != out ({metrics['records_out']}) + "
            f"quarantined ({metrics['quarantined']}) + duplicates ({metrics['duplicates']}) + late ({metrics.get('late', 0)})"
        )
    return metrics


class ConservationError(RuntimeError):
    """A stage's figures do not add up: something was lost or counted twice."""


COUNTS = ("records_in", "records_out", "quarantined", "duplicates", "late")


def conservation_holds(metrics: dict[str, Any]) -> bool | None:
    """in == out + quarantined + duplicates + late, or None when the stage does not count records."""
    if not all(k in metrics for k in COUNTS[:4]):
        return None
    return metrics["records_in"] == metrics["records_out"] + metrics["quarantined"] + metrics["duplicates"] + metrics.get("late", 0)


def record_run_metrics(spark: "SparkSession", settings: Settings, stage: str, args: argparse.Namespace,
                       metrics: dict[str, Any]) -> bool | None:
    """Write the run's figures to ``ops.run_metrics`` (a retry replaces its row) and return whether
    the conservation equation holds."""
    conserved = conservation_holds(metrics)
    counts = [int(metrics[k]) if k in metrics else None for k in COUNTS]
    row = (stage, args.run_id, args.start, args.end, dt.datetime.now(dt.timezone.utc), float(metrics["seconds"]),
           *counts, conserved, json.dumps(metrics, default=str, sort_keys=True))
    upsert(spark, spark.createDataFrame([row], TABLES["run_metrics"].schema), "run_metrics", settings)
    return conserved


# --- sinks -----------------------------------------------------------------------------------------

def _merge_condition(spec: TableSpec) -> str:
    if not spec.key:
        raise ValueError(f"table {spec.name} has no key to merge on")
    return " AND ".join(f"t.`{k}` = s.`{k}`" for k in spec.key)


def merge_new(spark: "SparkSession", df: "DataFrame", table: str, settings: Settings) -> None:
    """Insert the rows of ``df`` whose key is not in ``table`` yet: replaying the same rows is a no-op."""
    from delta.tables import DeltaTable

    spec = TABLES[table]
    source = df.select(*[f.name for f in spec.schema.fields]).dropDuplicates(list(spec.key))
    target = DeltaTable.forPath(spark, spec.path(settings))
    target.alias("t").merge(source.alias("s"), _merge_condition(spec)).whenNotMatchedInsertAll().execute()


def upsert(spark: "SparkSession", df: "DataFrame", table: str, settings: Settings) -> None:
    """Insert or replace rows by key (state that later runs refine)."""
    from delta.tables import DeltaTable

    spec = TABLES[table]
    source = df.select(*[f.name for f in spec.schema.fields]).dropDuplicates(list(spec.key))
    target = DeltaTable.forPath(spark, spec.path(settings))
    (
        target.alias("t")
        .merge(source.alias("s"), _merge_condition(spec))
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )


def append_once(df: "DataFrame", table: str, settings: Settings, app_id: str, version: int) -> None:
    """Append with Delta's idempotent-write options: a second write with the same (app id, version)
    is skipped by Delta itself, so a retried append never doubles an append-only table."""
    spec = TABLES[table]
    (
        df.select(*[f.name for f in spec.schema.fields])
        .write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", version)
        .save(spec.path(settings))
    )


# --- change-feed progress ---------------------------------------------------------------------------

def table_version(spark: "SparkSession", table: str, settings: Settings) -> int:
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, TABLES[table].path(settings)).history(1).select("version").first()
    return int(row["version"])


def last_consumed(spark: "SparkSession", stage: str, table: str, settings: Settings) -> int:
    """The upstream version this stage consumed last (-1 when it never ran)."""
    from pyspark.sql import functions as F

    rows = (
        TABLES["progress"].read(spark, settings)
        .where((F.col("stage") == stage) & (F.col("source_table") == table))
        .select("version")
        .collect()
    )
    return int(rows[0]["version"]) if rows else -1


def read_changes(spark: "SparkSession", stage: str, table: str, settings: Settings) -> tuple["DataFrame", int, int]:
    """Rows inserted into ``table`` since this stage's last consumed version.

    Returns (rows with the table's own columns, first version read, last version read). When nothing
    changed the frame is empty and first > last.
    """
    from pyspark.sql import functions as F

    spec = TABLES[table]
    start = last_consumed(spark, stage, table, settings) + 1
    end = table_version(spark, table, settings)
    if start > end:
        return spark.createDataFrame([], spec.schema), start, end
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", start)
        .option("endingVersion", end)
        .load(spec.path(settings))
        .where(F.col("_change_type").isin("insert", "update_postimage"))
        .select(*[f.name for f in spec.schema.fields])
    )
    return changes, start, end


def commit_progress(spark: "SparkSession", stage: str, table: str, version: int, run_id: str, settings: Settings) -> None:
    """Record that ``stage`` has consumed ``table`` up to ``version`` (call after the stage's writes)."""
    from pyspark.sql import functions as F

    row = spark.createDataFrame([(stage, table, int(version), run_id)], "stage string, source_table string, version long, run_id string")
    upsert(spark, row.withColumn("updated", F.current_timestamp()), "progress", settings)
