"""What a stage reads of its upstream tables, by Delta version, and the log of what it consumed.

* :func:`read_changes` / :func:`read_net_changes`: the rows committed to a table since this stage's
  last consumed version (its change feed), so a rerun reads the very same rows;
* :func:`replay_rows`: a replay's input instead, the rows of an event-time range
  (:func:`changes_for` and :func:`net_changes_for` pick one or the other from the job's arguments);
* ``ops.progress``, an append-only log of (stage, source table, version consumed):
  :func:`consumed_versions` reads it, :func:`commit_progress` appends to it once a run's writes are
  done (:func:`sda.pipeline.runtime.run_stage`), :func:`compact_progress` drops superseded rows;
* :func:`history` and :func:`table_version`: a table's Delta log.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import TYPE_CHECKING, Any

from sda.config.settings import Settings
from sda.lake.tables import TABLES, TableSpec, registered_columns
from sda.pipeline import sinks
from sda.pipeline.sinks import delta_ref

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import Column, DataFrame, SparkSession


def history(spark: "SparkSession", table: str, settings: Settings, limit: int | None = None) -> "DataFrame":
    """``DESCRIBE HISTORY`` of a registered table (newest first)."""
    return spark.sql(f"DESCRIBE HISTORY {delta_ref(TABLES[table].path(settings))}"
                     + (f" LIMIT {int(limit)}" if limit else ""))


def table_version(spark: "SparkSession", table: str, settings: Settings) -> int:
    row = history(spark, table, settings, limit=1).select("version").first()
    return int(row["version"])


def consumed_versions(spark: "SparkSession", settings: Settings, stage: str | None = None,
                      table: str | None = None) -> dict[Any, int]:
    """The last version each stage consumed of each table, from ``ops.progress`` (an append-only
    log: the row committed last per (stage, source table) holds it, so moving a stage back is one more
    row). Keys are source tables when ``stage`` is given, else (stage, source table) pairs; filtered by
    ``table`` when given."""
    from pyspark.sql import functions as F

    rows = TABLES["progress"].read(spark, settings)
    if stage is not None:
        rows = rows.where(F.col("stage") == stage)
    if table is not None:
        rows = rows.where(F.col("source_table") == table)
    latest = (rows.groupBy("stage", "source_table")
              .agg(F.max_by("version", F.struct("updated", "version")).alias("version")).collect())
    if stage is not None:
        return {r["source_table"]: int(r["version"]) for r in latest}
    return {(r["stage"], r["source_table"]): int(r["version"]) for r in latest}


def last_consumed(spark: "SparkSession", stage: str, table: str, settings: Settings) -> int:
    """The upstream version this stage consumed last (-1 when it never ran)."""
    return consumed_versions(spark, settings, stage, table).get(table, -1)


def commit_progress(spark: "SparkSession", stage: str, consumed: dict[str, int], run_id: str,
                    settings: Settings) -> None:
    """Record, in one Delta commit (a blind append to the ``ops.progress`` log), that ``stage`` has
    consumed each table up to its version (:func:`sda.pipeline.runtime.run_stage` calls this after the
    stage's writes). A retry appends the same versions again, which changes nothing a reader sees;
    the maintenance job drops the superseded rows (:func:`compact_progress`)."""
    from pyspark.sql import functions as F

    if not consumed:
        return
    rows = [(stage, table, int(version), run_id) for table, version in sorted(consumed.items())]
    df = spark.createDataFrame(rows, "stage string, source_table string, version long, run_id string")
    (df.withColumn("updated", F.current_timestamp()).select(*TABLES["progress"].schema.fieldNames())
     .write.format("delta").mode("append").save(TABLES["progress"].path(settings)))


def compact_progress(spark: "SparkSession", settings: Settings) -> int:
    """Delete the ``ops.progress`` rows a later row of the same (stage, source table) supersedes;
    returns how many. Stages appending meanwhile do not conflict with it (blind appends)."""
    ref = delta_ref(TABLES["progress"].path(settings))
    statement = (
        f"MERGE INTO {ref} t USING (SELECT stage, source_table, "
        "max_by(struct(updated, version), struct(updated, version)) AS last "
        f"FROM {ref} GROUP BY stage, source_table) m "
        "ON t.stage = m.stage AND t.source_table = m.source_table "
        "AND (t.updated < m.last.updated OR (t.updated = m.last.updated AND t.version < m.last.version)) "
        "WHEN MATCHED THEN DELETE"
    )

    def attempt() -> int:
        row = spark.sql(statement).first()
        return int(row["num_deleted_rows"] or 0) if row is not None else 0

    return sinks.with_conflict_retry(attempt, "compact ops.progress", attempts=sinks.CONFLICT_ATTEMPTS,
                                     backoff_s=sinks.CONFLICT_BACKOFF_S)


def _start(spark: "SparkSession", stage: str, table: str, settings: Settings, consumed: dict[str, int] | None) -> int:
    """The first version of ``table`` this stage has not consumed: from ``consumed`` (the stage's
    ``ops.progress`` versions, as :func:`consumed_versions` gave them at the start of this run) when
    given, else read now."""
    if consumed is None:
        return last_consumed(spark, stage, table, settings) + 1
    return consumed.get(table, -1) + 1


def _end(spark: "SparkSession", table: str, settings: Settings, latest: dict[str, int] | None) -> int:
    """The version a change-feed read ends at: ``table``'s newest, as the stage's lag read it at the start of this run
    (``latest``: taken once, so a second read of the same table in the run reads the history again), else read now."""
    if latest and table in latest:
        return latest.pop(table)
    return table_version(spark, table, settings)


def read_changes(spark: "SparkSession", stage: str, table: str, settings: Settings,
                 consumed: dict[str, int] | None = None, latest: dict[str, int] | None = None
                 ) -> tuple["DataFrame", int, int]:
    """Rows inserted into ``table`` since this stage's last consumed version (``consumed``: the
    stage's consumed versions read already this run, see :func:`changes_for`).

    Returns (rows with the table's own columns, first version read, last version read). When nothing
    changed the frame is empty and first > last.
    """
    from pyspark.sql import functions as F

    spec = TABLES[table]
    start = _start(spark, stage, table, settings, consumed)
    end = _end(spark, table, settings, latest)
    if start > end:
        return spark.createDataFrame([], spec.schema), start, end
    if start == 0:
        # Everything from the beginning: the snapshot at ``end`` holds the same current rows, needs no
        # change-feed files (which VACUUM may have removed, see jobs/maintenance.py) and skips rows
        # that were later deleted.
        return _snapshot(spark, spec, settings, end), start, end
    feed = _change_feed(spark, spec, settings, start, end)
    inserted = feed.where(F.col("_change_type").isin("insert", "update_postimage"))
    changes = inserted.select(*registered_columns(feed, spec))
    return changes, start, end


def read_net_changes(spark: "SparkSession", stage: str, table: str, settings: Settings,
                     consumed: dict[str, int] | None = None, latest: dict[str, int] | None = None
                     ) -> tuple["DataFrame", "DataFrame", int, int]:
    """For a table whose rows are also updated and deleted: the *net* change per key since this
    stage's last consumed version -- (rows whose last change is an insert or update, rows whose last
    change is a delete (their pre-image), first version, last version). A row inserted and deleted
    within the range shows up only as deleted."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spec = TABLES[table]
    start = _start(spark, stage, table, settings, consumed)
    end = _end(spark, table, settings, latest)
    empty = spark.createDataFrame([], spec.schema)
    if start > end:
        return empty, empty, start, end
    if start == 0:  # everything so far: the snapshot at ``end`` (see read_changes)
        return _snapshot(spark, spec, settings, end), empty, start, end
    feed = _change_feed(spark, spec, settings, start, end).where(
        F.col("_change_type").isin("insert", "update_postimage", "delete"))
    latest = Window.partitionBy(*spec.key).orderBy(F.col("_commit_version").desc())
    last_change = feed.withColumn("_rank", F.row_number().over(latest)).where(F.col("_rank") == 1)
    cols = registered_columns(feed, spec)
    current = last_change.where(F.col("_change_type") != "delete").select(*cols)
    deleted = last_change.where(F.col("_change_type") == "delete").select(*cols)
    return current, deleted, start, end


def _snapshot(spark: "SparkSession", spec: TableSpec, settings: Settings, version: int) -> "DataFrame":
    """The table's rows as of ``version``, with its own columns."""
    rows = spark.read.format("delta").option("versionAsOf", version).load(spec.path(settings))
    return rows.select(*registered_columns(rows, spec))


def _change_feed(spark: "SparkSession", spec: TableSpec, settings: Settings, start: int, end: int) -> "DataFrame":
    """Every change of versions start..end, with Delta's _change_type and _commit_version columns."""
    return (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", start)
        .option("endingVersion", end)
        .load(spec.path(settings))
    )


def _in_range(args: argparse.Namespace) -> "Column":
    """A replay's event-time range ``[args.start, args.end)``."""
    from pyspark.sql import functions as F

    return (F.col("event_time") >= F.lit(args.start)) & (F.col("event_time") < F.lit(args.end))


def replay_rows(spark: "SparkSession", table: str, settings: Settings, args: argparse.Namespace) -> "DataFrame":
    """A replay's input: the rows of ``table`` (its current snapshot) for the event-time range
    ``[args.start, args.end)``. Bronze has no event time before parsing, so its rows are those that
    can hold one in the range: ingested at or after ``start - clock_skew_s`` (an event time is at most
    the clock skew after its ingest time; late records arrive *later*, so there is no upper bound)."""
    from pyspark.sql import functions as F

    spec = TABLES[table]
    df = spec.read(spark, settings)
    df = df.select(*registered_columns(df, spec))
    cols = spec.schema.fieldNames()
    if "event_time" in cols:
        if "event_date" in cols:  # partition pruning
            df = df.where(F.col("event_date").between(args.start.date(), args.end.date()))
        return df.where(_in_range(args))
    earliest = args.start - dt.timedelta(seconds=settings.clock_skew_s)
    return df.where((F.col("ingest_date") >= earliest.date()) & (F.col("ingest_time") >= F.lit(earliest)))


def rows_before(spark: "SparkSession", table: str, settings: Settings, args: argparse.Namespace,
                first: int, last: int) -> "DataFrame":
    """For a table whose rows are only ever inserted (silver ``observations``, written by
    ``sinks.merge_new``): its rows that :func:`changes_for` did not return this run, so that the two
    together are the table as of ``last``, each row once. Incremental, the snapshot at ``first - 1``
    (every row versions ``first..last`` added is in the change feed, and none is updated or deleted);
    from the beginning (``first == 0``), none; in a replay, the rows outside its event-time range."""
    spec = TABLES[table]
    if args.replay:
        return _snapshot(spark, spec, settings, last).where(~_in_range(args))  # event_time is never null
    if first == 0:
        return spark.createDataFrame([], spec.schema)
    return _snapshot(spark, spec, settings, first - 1)


def changes_for(spark: "SparkSession", stage: str, table: str, settings: Settings, args: argparse.Namespace
                ) -> tuple["DataFrame", int, int]:
    """:func:`read_changes`, or in a replay :func:`replay_rows` (first == last == the table's version).
    ``args.consumed``, when :func:`sda.pipeline.runtime.run_stage` set it, holds the stage's consumed
    versions as read at the start of the run (one ``ops.progress`` read per run, not one per table), and
    ``args.latest`` the inputs' newest versions as its lag read them (one history read per input and run)."""
    if args.replay:
        version = table_version(spark, table, settings)
        return replay_rows(spark, table, settings, args), version, version
    return read_changes(spark, stage, table, settings, getattr(args, "consumed", None), getattr(args, "latest", None))


def net_changes_for(spark: "SparkSession", stage: str, table: str, settings: Settings, args: argparse.Namespace
                    ) -> tuple["DataFrame", "DataFrame", int, int]:
    """:func:`read_net_changes`, or in a replay the range's rows and nothing retracted."""
    if args.replay:
        version = table_version(spark, table, settings)
        return (replay_rows(spark, table, settings, args), spark.createDataFrame([], TABLES[table].schema),
                version, version)
    return read_net_changes(spark, stage, table, settings, getattr(args, "consumed", None),
                            getattr(args, "latest", None))
