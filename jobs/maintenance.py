"""maintenance: compact small files and VACUUM every Delta table, without breaking a change-feed reader.

    python jobs/maintenance.py --start ISO --end ISO --run-id ID [--tables a,b] [--dry-run]

For every registered table (or those named by ``--tables``):

1. **Compaction** (``OPTIMIZE``, bin-packing): a 15-minute pipeline appends and MERGEs small files;
   OPTIMIZE rewrites them per partition into few large ones. Its commit is ``dataChange=false``: the
   rows are the same, and change-feed readers skip that version.
2. **VACUUM**: deletes the files that are no longer part of the current snapshot -- data files a
   later OPTIMIZE, MERGE or DELETE removed longer ago than the retention, and ``_change_data`` files
   written longer ago than the retention. The retention is ``SDA_VACUUM_RETENTION_H`` (default 168 h),
   never less than the table's ``delta.deletedFileRetentionDuration`` (7 days, :mod:`sda.lake.tables`):
   Delta's retention check stays on, so going below that would be refused anyway.

``--dry-run`` changes no table: it reports the file counts, how many files OPTIMIZE could rewrite, and
what ``VACUUM ... DRY RUN`` would delete. Only the run's own row in ``ops.run_metrics`` is written.

Retention and the change feed
-----------------------------
normalize, dedup and correlate read their upstream table's change feed and record in
``ops.progress`` the last version they consumed (:mod:`sda.pipeline.changefeed`); the next run reads
``version + 1`` onwards. Reading version *k*'s changes needs the data files version *k* added (or
its ``_change_data`` files) and version *k*'s commit in ``_delta_log``. A data file added at *k* and
later removed at *r* is removed at ``time(r) >= time(k)``, and a ``_change_data`` file of *k* is
written just before ``time(k)``; so every file a consumer still needs survives if the VACUUM horizon
(``now - retention``) lies before the commit time of the oldest version it still needs. The guard,
per table and before each VACUUM:

* retention = max(configured, ``now - time(oldest needed version)`` + 1 h margin), rounded up to
  whole hours; widened tables are reported (``retention_widened``) with a warning naming the
  lagging stage;
* a known consumer (:data:`CHANGE_FEED_CONSUMERS`) without a progress row will start at version 0
  and needs the whole history: that table is not vacuumed until it has run once;
* a consumer whose next version is no longer in the log cannot read its change feed any more
  (``delta.logRetentionDuration``, 30 days: Delta drops expired commits at checkpoints, whatever
  VACUUM does): the table is not vacuumed, and the warning says to replay that stage. A lag longer
  than the log retention is warned about as soon as it happens: those commits go at the next checkpoint.

A progress row left behind by a stage that no longer runs pins its table's history in the same way
(the warning names it, day after day): delete that row.

Retention and replay
--------------------
* *Replay from bronze* (rebuild silver and gold from what bronze holds) reads bronze's **current
  snapshot**. Bronze is append-only and VACUUM only deletes files that are no longer in the current
  snapshot (OPTIMIZE moved their rows into new files), so this works at any age, whatever the retention.
* *Change-feed replay of old versions* (moving a stage's progress row back so it re-reads what it
  consumed before) needs those versions' files and commits: only versions newer than the VACUUM
  horizon and the log retention can be replayed. Once a table has been compacted and vacuumed, a
  stage reset to "never ran" (progress row deleted, change feed from version 0) can no longer read
  its change feed: rebuild from the snapshot instead. A progress row moved back is honoured by the
  next maintenance run (the guard widens the retention from there), so move it back before the
  files are gone, and not while this job runs. Time travel (``versionAsOf``) has the same horizon.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import logging
import math
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sda.config.settings import Settings
from sda.lake.spark import temporary_conf
from sda.lake.tables import TABLES, sync_properties
from sda.pipeline import changefeed, retention, runtime, sinks
from sda.pipeline.arguments import stage_parser

STAGE = "maintenance"
log = logging.getLogger("sda.maintenance")

# The stages that read a table through its change feed (changefeed.read_changes), by table. A listed
# stage with no ops.progress row yet reads from version 0 on its first run, so its table keeps its
# whole history until then. Progress rows of stages not listed here are honoured as well.
CHANGE_FEED_CONSUMERS: dict[str, tuple[str, ...]] = {
    "radar_frames": ("normalize",),
    "optical_tracks": ("normalize",),
    "isl_beacons": ("normalize",),
    "tdm_messages": ("normalize",),
    "observations": ("dedup",),
    "observations_dedup": ("correlate",),
    "correlated": ("fuse", "acquire"),
    "uncorrelated": ("fuse", "acquire"),
    "catalog": ("acquire",),
}
SAFETY_MARGIN_H = 1.0  # _change_data files are written a little before their commit; clocks drift
# Delta's own defaults, used when a table does not set the property
DEFAULT_TOMBSTONE_RETENTION_H = 168.0  # delta.deletedFileRetentionDuration
DEFAULT_LOG_RETENTION_H = 720.0  # delta.logRetentionDuration
# Another job committing to the table while OPTIMIZE runs: Delta refuses the loser's commit, and
# sinks.with_conflict_retry runs it again.
is_conflict = sinks.is_conflict
with_conflict_retry = sinks.with_conflict_retry
# VACUUM lists the table's directories with this many tasks. Spark's default (10000) costs minutes
# of task scheduling per table on a few local cores, even for an empty table.
LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"



# --- pure decisions (unit-tested without Spark) -------------------------------------------------------

def retention_needed(now: dt.datetime, needed_since: dt.datetime | None, configured_h: float,
                     margin_h: float = SAFETY_MARGIN_H) -> int:
    """Whole hours VACUUM must retain: at least ``configured_h``, and back to ``margin_h`` before
    ``needed_since`` (the commit time of the oldest version a change-feed consumer still has to read).

    Rounded up: Delta rounds the hours it is given to the nearest whole hour.

    >>> now = dt.datetime(2026, 1, 10, tzinfo=dt.timezone.utc)
    >>> retention_needed(now, now - dt.timedelta(hours=200), 168)
    201
    """
    hours = float(configured_h)
    if needed_since is not None:
        hours = max(hours, (now - needed_since).total_seconds() / 3600 + margin_h)
    return math.ceil(hours - 1e-9)


@dataclasses.dataclass(frozen=True)
class Guard:
    """What the change-feed consumers of one table need kept."""

    needed_version: int | None = None  # the oldest version a consumer still has to read
    needed_since: dt.datetime | None = None  # the earliest commit time from that version on
    lagging_stage: str | None = None  # the consumer that needs it
    skip_reason: str | None = None  # set: do not vacuum this table at all


def consumer_guard(table: str, consumed: Mapping[str, int | None], commits: Mapping[int, dt.datetime]) -> Guard:
    """The guard for ``table`` from each consumer's last consumed version (None: it never ran) and
    the table's commits in the log (version -> commit time)."""
    never = sorted(stage for stage, version in consumed.items() if version is None)
    if never:
        return Guard(skip_reason=f"{', '.join(never)} has not consumed {table} yet and will read its change feed "
                                 "from version 0: keeping all history until it has run")
    if not consumed or not commits:
        return Guard()
    oldest_in_log, latest = min(commits), max(commits)
    stage, last = min(consumed.items(), key=lambda item: (item[1], item[0]))
    needed = last + 1
    if needed > latest:
        return Guard()  # every consumer has read everything committed so far
    if needed < oldest_in_log:
        return Guard(needed_version=needed, lagging_stage=stage,
                     skip_reason=f"{stage} needs {table} version {needed}, older than the log still holds "
                                 f"(version {oldest_in_log}): its change feed cannot be read any more; replay "
                                 f"{stage} from the snapshot (see jobs/maintenance.py); not vacuuming meanwhile")
    since = min(ts for version, ts in commits.items() if version >= needed)
    return Guard(needed_version=needed, needed_since=since, lagging_stage=stage)


def interval_hours(text: str | None, default_h: float) -> float:
    """A Delta interval property ('interval 7 days', '30 days', 'interval 12 hours') in hours."""
    units = {"second": 1 / 3600, "minute": 1 / 60, "hour": 1.0, "day": 24.0, "week": 168.0}
    match = re.fullmatch(r"\s*(?:interval\s+)?(\d+(?:\.\d+)?)\s+(second|minute|hour|day|week)s?\s*", text or "", re.I)
    if not match:
        return default_h
    return float(match.group(1)) * units[match.group(2).lower()]


def compaction_candidates(files: Iterable[str]) -> int:
    """Files OPTIMIZE could rewrite, at most: those sharing their partition directory with another
    file (OPTIMIZE bins files per partition and also leaves files over 1 GB alone)."""
    per_dir = Counter(path.rsplit("/", 1)[0] for path in files)
    return sum(n for n in per_dir.values() if n > 1)


def parse_table_list(text: str) -> list[str]:
    """``--tables a,b``: registered names, in the order given, each once."""
    names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not names:
        raise argparse.ArgumentTypeError(f"no table named; known: {', '.join(TABLES)}")
    unknown = [name for name in names if name not in TABLES]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown table(s) {', '.join(unknown)}; known: {', '.join(TABLES)}")
    return names


# --- Delta --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class VacuumPlan:
    table: str
    retention_h: int
    configured_h: float  # max(settings, the table's deletedFileRetentionDuration)
    log_retention_h: float
    guard: Guard

    @property
    def widened(self) -> bool:
        return self.guard.skip_reason is None and self.retention_h > math.ceil(self.configured_h - 1e-9)


def _ref(table: str, settings: Settings) -> str:
    return sinks.delta_ref(TABLES[table].path(settings))


def _detail(spark: SparkSession, table: str, settings: Settings) -> tuple[int, dict[str, str]]:
    """(number of files in the current snapshot, table properties)."""
    row = spark.sql(f"DESCRIBE DETAIL {_ref(table, settings)}").select("numFiles", "properties").first()
    return int(row["numFiles"] or 0), dict(row["properties"] or {})


def _latest_version(spark: SparkSession, table: str, settings: Settings) -> int:
    return changefeed.table_version(spark, table, settings)


def consumed_versions(spark: SparkSession, table: str, settings: Settings) -> dict[str, int | None]:
    """Each change-feed consumer of ``table`` -> the last version it consumed (None: never ran)."""
    consumed: dict[str, int | None] = {stage: None for stage in CHANGE_FEED_CONSUMERS.get(table, ())}
    by_stage = changefeed.consumed_versions(spark, settings, table=table)
    consumed.update({stage: version for (stage, _), version in by_stage.items()})
    return consumed


def commit_times(spark: SparkSession, table: str, settings: Settings) -> dict[int, dt.datetime]:
    """version -> commit time of every commit the log still holds."""
    rows = (
        changefeed.history(spark, table, settings)
        .select("version", F.col("timestamp").cast("double").alias("epoch_s"))  # epoch: no time-zone guessing
        .collect()
    )
    return {int(r["version"]): dt.datetime.fromtimestamp(r["epoch_s"], dt.timezone.utc) for r in rows}


def plan_vacuum(spark: SparkSession, settings: Settings, table: str, now: dt.datetime) -> VacuumPlan:
    """The retention VACUUM may use on ``table`` at ``now`` (see the module docstring)."""
    _, props = _detail(spark, table, settings)
    tombstone_h = interval_hours(props.get("delta.deletedFileRetentionDuration"), DEFAULT_TOMBSTONE_RETENTION_H)
    log_h = interval_hours(props.get("delta.logRetentionDuration"), DEFAULT_LOG_RETENTION_H)
    configured_h = max(settings.vacuum_retention_h, tombstone_h)
    if settings.vacuum_retention_h < tombstone_h:
        log.info("%s: SDA_VACUUM_RETENTION_H=%s is below the table's delta.deletedFileRetentionDuration (%s h); "
                 "using the latter (Delta's retention check stays on)", table, settings.vacuum_retention_h, tombstone_h)
    consumed = consumed_versions(spark, table, settings)
    commits = commit_times(spark, table, settings) if consumed else {}
    guard = consumer_guard(table, consumed, commits)
    return VacuumPlan(table, retention_needed(now, guard.needed_since, configured_h), configured_h, log_h, guard)


def _vacuumed_files(spark: SparkSession, table: str, settings: Settings, after_version: int) -> int | None:
    """Files the VACUUM that committed after ``after_version`` deleted (Delta logs VACUUM START/END
    commits; None when vacuum logging is switched off)."""
    rows = (
        changefeed.history(spark, table, settings, limit=20)
        .where((F.col("version") > after_version) & (F.col("operation") == "VACUUM END"))
        .orderBy("version")
        .select("operationMetrics")
        .collect()
    )
    if not rows:
        return None
    return int((rows[0]["operationMetrics"] or {}).get("numDeletedFiles", 0))


def compact(spark: SparkSession, settings: Settings, table: str, dry_run: bool) -> dict[str, Any]:
    files_before, properties = _detail(spark, table, settings)
    if dry_run:
        files = spark.read.format("delta").load(TABLES[table].path(settings)).inputFiles()
        return {"files_before": files_before, "compaction_candidates": compaction_candidates(files)}
    # a table made before a registered property changed (its statistics columns) gets it first, so
    # the files OPTIMIZE writes follow it
    changed = sync_properties(spark, settings, table, properties)
    if changed:
        log.info("%s: table properties set: %s", table, changed)

    def optimize():
        return spark.sql(f"OPTIMIZE {_ref(table, settings)}").select("metrics").first()

    metrics = with_conflict_retry(optimize, f"OPTIMIZE {table}")["metrics"]
    files_after, _ = _detail(spark, table, settings)
    return {
        "files_before": files_before,
        "files_after": files_after,
        "files_removed": int(metrics["numFilesRemoved"]),
        "files_added": int(metrics["numFilesAdded"]),
        "properties_set": sorted(changed),
    }


def vacuum(spark: SparkSession, settings: Settings, table: str, dry_run: bool) -> dict[str, Any]:
    plan = plan_vacuum(spark, settings, table, dt.datetime.now(dt.timezone.utc))
    guard = plan.guard
    out: dict[str, Any] = {"retention_h": plan.retention_h, "retention_widened": plan.widened,
                           "lagging_stage": guard.lagging_stage, "needed_version": guard.needed_version}
    if guard.skip_reason:
        log.warning("%s: VACUUM skipped: %s", table, guard.skip_reason)
        return {**out, "retention_h": None, "files_vacuumed": 0, "vacuum_skipped": guard.skip_reason}
    if plan.widened:
        log.warning("%s: %s still needs version %d (committed %s): VACUUM retains %d h instead of %g h",
                    table, guard.lagging_stage, guard.needed_version, guard.needed_since.isoformat(),
                    plan.retention_h, plan.configured_h)
    if plan.widened and plan.retention_h > plan.log_retention_h:
        log.warning("%s: %s lags more than delta.logRetentionDuration (%g h): its commits will be dropped at a "
                    "coming checkpoint and its change feed will break; replay it or raise the log retention",
                    table, guard.lagging_stage, plan.log_retention_h)
    # The path comes from the lakehouse setting, which refuses ` ' " ; and control characters
    # (sda.config.settings); the retention is a number formatted by code (whole hours, rounded up: never less).
    vacuum_sql = f"VACUUM {_ref(table, settings)} RETAIN {math.ceil(float(plan.retention_h)):d} HOURS"
    with temporary_conf(spark, LISTING_PARALLELISM, str(max(2, settings.shuffle_partitions))):  # VACUUM's listing
        if dry_run:
            files = spark.sql(f"{vacuum_sql} DRY RUN").count()
            return {**out, "files_vacuumed": files}
        before = _latest_version(spark, table, settings)
        with_conflict_retry(lambda: spark.sql(vacuum_sql).collect(), f"VACUUM {table}")
    return {**out, "files_vacuumed": _vacuumed_files(spark, table, settings, before)}


def run(spark: SparkSession, settings: Settings, args: argparse.Namespace) -> dict[str, Any]:
    names = args.tables or list(TABLES)
    per_table: dict[str, dict[str, Any]] = {}
    # ops.progress is an append-only log (sda.pipeline.changefeed.commit_progress): first drop its superseded rows
    superseded = changefeed.compact_progress(spark, settings) if "progress" in names and not args.dry_run else 0
    for name in names:
        started = time.monotonic()
        result = {**compact(spark, settings, name, args.dry_run), **vacuum(spark, settings, name, args.dry_run)}
        result["seconds"] = round(time.monotonic() - started, 2)
        per_table[name] = result
        log.info("%s%s: %s", "(dry run) " if args.dry_run else "", name, result)
    return {
        "dry_run": args.dry_run,
        "tables": per_table,
        "progress_rows_superseded": superseded,
        "files_compacted": sum(t.get("files_removed", 0) for t in per_table.values()),
        "files_vacuumed": sum(t.get("files_vacuumed") or 0 for t in per_table.values()),
        "retention_widened": {n: {"hours": t["retention_h"], "stage": t["lagging_stage"]}
                              for n, t in per_table.items() if t["retention_widened"]},
        "vacuum_skipped": {n: t["vacuum_skipped"] for n, t in per_table.items() if t.get("vacuum_skipped")},
        "files_pruned": None if args.dry_run else prune_files(spark, settings, args.logs),
    }


def ingested_done(spark: SparkSession, settings: Settings, horizon: float) -> dict[str, tuple[int, int]]:
    """The landed files older than ``horizon`` (epoch s) that the ledger holds as done with the size and
    modification time they have now: relative path -> (size, mtime us). The listing goes to the server and
    only the matches come back (the ledger holds every file ever landed)."""
    landing = Path(settings.landing)
    old = [(path.relative_to(landing).as_posix(), st.st_size, st.st_mtime_ns // 1000)
           for path, st in retention.files(landing, skip_private=True) if st.st_mtime < horizon]
    if not old:
        return {}
    listing = spark.createDataFrame(old, "file_path string, file_size long, file_mtime_us long")
    done = TABLES["ingested_files"].read(spark, settings).where(F.col("status") == "done")
    rows = listing.join(done.select("file_path", "file_size", "file_mtime_us"),
                        ["file_path", "file_size", "file_mtime_us"], "left_semi").collect()
    return {r["file_path"]: (int(r["file_size"]), int(r["file_mtime_us"])) for r in rows}


def prune_files(spark: SparkSession, settings: Settings, logs: Path | None) -> dict[str, Any]:
    """:mod:`sda.pipeline.retention`: landed files ingested, old CDMs, old task logs; counts and the bytes left."""
    now = time.time()
    landing = Path(settings.landing)
    ingested = (ingested_done(spark, settings, now - settings.landing_retention_h * 3600.0)
                if settings.landing_retention_h > 0 else {})
    out = {"landing": len(retention.prune_landing(landing, ingested, settings.landing_retention_h, now)),
           "outbox": retention.prune_older(Path(settings.outbox), settings.outbox_retention_h, now),
           "logs": retention.prune_older(logs, settings.log_retention_h, now)}
    out["bytes_left"] = {"landing": retention.disk_usage(landing),
                         "outbox": retention.disk_usage(Path(settings.outbox)), "logs": retention.disk_usage(logs)}
    log.info("files pruned: %s", out)
    return out


def parser() -> argparse.ArgumentParser:
    p = stage_parser(STAGE, "compact small files and VACUUM the lakehouse's Delta tables")
    p.add_argument("--tables", type=parse_table_list, default=None,
                   help="comma-separated registered table names (default: every table)")
    p.add_argument("--dry-run", action="store_true", help="report what would be done, change nothing")
    p.add_argument("--logs", type=Path, default=None,
                   help="Airflow's task-log directory, pruned after SDA_LOG_RETENTION_H (default: logs are kept)")
    return p


def main(argv: list[str] | None = None, settings: Settings | None = None,
         spark: SparkSession | None = None) -> dict[str, Any]:
    return runtime.run_stage(STAGE, argv, run, parser(), settings=settings, spark=spark)


if __name__ == "__main__":
    main(sys.argv[1:])
