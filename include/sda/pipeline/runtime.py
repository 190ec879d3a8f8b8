"""What every stage job shares: its CLI, idempotent Delta sinks, change-feed progress, run metrics.

A job is ``main(argv)`` -> :func:`run_stage` (parse and validate arguments, build the session,
ensure tables) -> the stage's ``run(spark, settings, args)``, which reads, calls pure transforms,
writes through the sinks below and returns its figures, including ``consumed`` (upstream table ->
last Delta version read). :func:`run_stage` then checks the conservation equation, records the
figures in ``ops.run_metrics``, and only then commits the consumed versions to ``ops.progress``.

Exactly-once *effect* comes from the pairing of a replayable input with idempotent outputs:

* inputs are read by version (:func:`read_changes`: the change feed from this stage's last consumed
  version + 1 to the table's current version), so a rerun reads the very same rows;
* every output is idempotent for those rows -- :func:`merge_new` inserts keys not present yet,
  :func:`upsert` replaces state by key with values recomputed from durable tables, and
  :func:`append_once` appends with Delta's ``txnAppId``/``txnVersion``, which Delta itself skips
  when that (app, version) is already committed;
* progress is committed last, in one Delta commit for all the stage's inputs. A crash before it
  (before the writes, between two of them, or after all of them) leaves the old progress, and the
  Airflow retry replays the same versions into sinks that already hold some or all of the rows:
  nothing is lost, nothing doubled. The outputs and the progress thus change together as far as any
  reader can tell, which is what committing them atomically is for.

:func:`checkpoint` marks the points between writes; tests arm them to kill a stage there.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sda.config.settings import Settings, SettingsError, load_settings
from sda.lake.tables import TABLES, TableSpec, ensure_tables

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("sda")
# A run id becomes part of file paths (Great Expectations' Data Docs directories): besides the
# character set, it may not start with '.' nor hold '..' (no '.', '..', hidden or parent directory).
RUN_ID_RE = re.compile(r"^(?!\.)(?!.*\.\.)[A-Za-z0-9_.:+\-]{1,200}\Z")
_RUN_ID_CHARS_RE = re.compile(r"^[A-Za-z0-9_.:+\-]{1,200}\Z")


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
    parser.add_argument("--replay", action="store_true",
                        help="recompute the event-time range [--start, --end) from the upstream tables instead of "
                             "consuming their change feed; no progress is committed (sda.pipeline.replay)")
    parser.add_argument("--mode", choices=("incremental", "replay"), default="incremental",
                        help="the same as a flag, for orchestrators: --mode replay is --replay (a backfill run)")
    return parser


def validate_args(args: argparse.Namespace) -> argparse.Namespace:
    args.start = parse_instant("start", args.start)
    args.end = parse_instant("end", args.end)
    if args.end <= args.start:
        raise StageArgumentError(f"--end {args.end.isoformat()} is not after --start {args.start.isoformat()}")
    args.run_id = check_run_id(args.run_id)
    args.replay = bool(getattr(args, "replay", False)) or getattr(args, "mode", "incremental") == "replay"
    return args


def check_run_id(run_id: str, what: str = "--run-id") -> str:
    """``run_id`` unchanged, or :class:`StageArgumentError` saying what is wrong with it. Airflow's
    ids (``manual__2026-11-21T10:00:00.123456+00:00``, ``scheduled__...``, ``backfill__...``) pass."""
    if not _RUN_ID_CHARS_RE.match(run_id):
        raise StageArgumentError(f"{what} {run_id!r}: use 1-200 characters from letters, digits and _ . : + -")
    if not RUN_ID_RE.match(run_id):
        raise StageArgumentError(
            f"{what} {run_id!r}: may not start with '.' nor contain '..' (run ids become directory names)"
        )
    return run_id


def run_stage(
    stage: str,
    argv: Sequence[str] | None,
    body: Callable[["SparkSession", Settings, argparse.Namespace], dict[str, Any]],
    parser: argparse.ArgumentParser,
    settings: Settings | None = None,
    spark: "SparkSession | None" = None,
    check: Callable[[argparse.Namespace, Settings], None] | None = None,
) -> dict[str, Any]:
    """Parse and validate, build the session, ensure tables, run ``body``, log a one-line summary.

    ``check(args, settings)`` validates the stage's own arguments (e.g. confines a path to the
    settings' roots) before any session is built; it raises :class:`StageArgumentError` or
    :class:`SettingsError` and may normalise ``args`` in place.

    Bad arguments exit with status 2 and a message (argparse's convention); bad settings likewise.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # our INFO lines in the task log, not hundreds of Great Expectations' registration notices
    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    try:
        args = validate_args(parser.parse_args(argv))
        settings = settings or load_settings()
        if check is not None:
            check(args, settings)
    except (StageArgumentError, SettingsError) as exc:
        parser.error(str(exc))
    from sda.lake.spark import SparkServerUnavailable, activate, connect, is_server_gone

    started = time.monotonic()
    if spark is None:
        try:
            spark = connect(settings)
        except SparkServerUnavailable as exc:
            parser.exit(1, f"{parser.prog}: {exc}\n")
    activate(spark)
    try:
        return _run_body(stage, spark, settings, args, body, started)
    except SparkServerUnavailable:
        raise
    except Exception as exc:
        if not is_server_gone(exc):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise SparkServerUnavailable(
            f"{stage}: the Spark Connect server at {getattr(spark, 'sda_url', settings.connect_url)} stopped answering ({first}); "
            "the stage's writes are idempotent: restart the server (`sda server start`) and retry the task"
        ) from exc


def _run_body(stage: str, spark: "SparkSession", settings: Settings, args: argparse.Namespace,
              body: Callable[["SparkSession", Settings, argparse.Namespace], dict[str, Any]], started: float
              ) -> dict[str, Any]:
    ensure_tables(spark, settings)
    before = {} if args.replay else consumed_versions(spark, settings, stage)
    lag = upstream_lag(spark, stage, settings, before) if before else {}
    progress(stage, "started: interval %s .. %s%s, run %s", args.start.isoformat(), args.end.isoformat(),
             " (replay)" if args.replay else "", args.run_id)
    metrics = body(spark, settings, args)
    metrics = {"stage": stage, "run_id": args.run_id, "seconds": round(time.monotonic() - started, 2),
               "mode": "replay" if args.replay else "incremental", **lag, **metrics}
    log.info("stage summary %s", json.dumps(metrics, default=str, sort_keys=True))
    log.info("%s", summary_line(metrics))
    print(json.dumps(metrics, default=str, sort_keys=True), file=sys.stdout, flush=True)
    conserved = record_run_metrics(spark, settings, stage, args, metrics)
    if conserved is False:
        # Before the progress commit: the inputs stay unconsumed, and every retry fails the same way
        # until someone looks.
        raise ConservationError(
            f"{stage} run {args.run_id}: records in ({metrics['records_in']}) != out ({metrics['records_out']}) + "
            f"quarantined ({metrics['quarantined']}) + duplicates ({metrics['duplicates']}) + late ({metrics.get('late', 0)})"
        )
    checkpoint(f"{stage}:before-progress")
    if not args.replay:  # a replay reads a range, not the feed: the incremental position stays where it was
        consumed = {t: int(v) for t, v in (metrics.get("consumed") or {}).items()}
        # nothing new consumed (a run with nothing to do): no commit at all
        commit_progress(spark, stage, {t: v for t, v in consumed.items() if before.get(t) != v}, args.run_id, settings)
    return metrics


def progress(stage: str, message: str, *values: Any) -> None:
    """One progress line in the task log (``<stage>: ...``): long stages call it between their steps."""
    log.info("%s: " + message, stage, *values)


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


LAG_HISTORY = 100  # commits read to date the oldest unconsumed one; more behind than that reads all


def upstream_lag(spark: "SparkSession", stage: str, settings: Settings,
                 consumed: dict[str, int] | None = None) -> dict[str, Any]:
    """How far behind its inputs the stage is as it starts, over the tables it consumes through the
    change feed (its ``ops.progress`` rows): ``lag_versions``, the Delta commits not yet consumed
    (versions are consecutive: the table's version minus the one consumed), and ``lag_seconds``, the
    age of the oldest of them (0 when it is up to date). A stage that has no progress row yet (first
    run, or no feed input) reports nothing. One ``DESCRIBE HISTORY ... LIMIT`` per input table."""
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
        latest = max((int(r["version"]) for r in recent), default=version)
        behind = max(0, latest - version)
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


# --- fault injection ---------------------------------------------------------------------------------

KILL_ENV = "SDA_KILL_AT"
KILL_AT: set[str] = set()  # armed in-process by tests: checkpoint() raises SimulatedCrash there


class SimulatedCrash(RuntimeError):
    """Raised at an armed checkpoint: the stage dies there, as a killed executor or driver would."""


def checkpoint(name: str) -> None:
    """A point between two writes of a stage (``<stage>:<where>``). Normally nothing happens.

    Armed in-process (``KILL_AT``) it raises :class:`SimulatedCrash`; armed through the environment
    (``SDA_KILL_AT=normalize:after-silver``, comma-separated) the process exits at once with status
    137, as after ``kill -9``: no ``finally`` block, no Spark shutdown hook, nothing flushed.
    """
    if name in KILL_AT:
        raise SimulatedCrash(name)
    if name in {p.strip() for p in os.environ.get(KILL_ENV, "").split(",") if p.strip()}:
        log.error("SDA_KILL_AT=%s: killing the process at %s", os.environ[KILL_ENV], name)
        os._exit(137)


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
    spark.conf.set("spark.databricks.delta.schema.autoMerge.enabled", "true")
    try:
        write_rows(spark, [row], "run_metrics", settings)
    finally:
        spark.conf.unset("spark.databricks.delta.schema.autoMerge.enabled")
    return conserved


# --- sinks -----------------------------------------------------------------------------------------

# Two writers committing to one table at once (a scheduled run beside a backfill or a replay, a
# maintenance OPTIMIZE): Delta's optimistic concurrency refuses the loser's commit with one of these.
CONFLICT_MARKERS = ("DELTA_CONCURRENT", "ConcurrentAppend", "ConcurrentDeleteRead", "ConcurrentDeleteDelete",
                    "ConcurrentTransaction", "ConcurrentWrite", "MetadataChanged", "ProtocolChanged",
                    "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED")
CONFLICT_ATTEMPTS = 4
CONFLICT_BACKOFF_S = 5.0  # then 10 s, 20 s: a pipeline commit takes seconds
T = TypeVar("T")


def is_conflict(exc: BaseException) -> bool:
    """A Delta concurrent-modification conflict (py4j surfaces it as a generic error naming the class)."""
    return any(marker in str(exc) for marker in CONFLICT_MARKERS)


def with_conflict_retry(action: Callable[[], T], what: str, attempts: int = CONFLICT_ATTEMPTS,
                        backoff_s: float = CONFLICT_BACKOFF_S, sleep: Callable[[float], None] = time.sleep) -> T:
    """Run ``action``; on a concurrent-modification conflict retry with doubling back-off, and raise
    the last conflict after ``attempts`` tries. Any other error is raised at once.

    Every writer here is a MERGE on the table's key (or an idempotent append), so running it again
    against the winner's commit gives the effect it would have had alone: retrying is safe, and
    scheduled runs, backfills and replays need no lock between them."""
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as exc:
            if attempt == attempts or not is_conflict(exc):
                raise
            delay = backoff_s * 2 ** (attempt - 1)
            first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            log.warning("%s: concurrent modification (attempt %d of %d), retrying in %.0f s: %s",
                        what, attempt, attempts, delay, first_line[:300])
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


class MergeSql:
    """The clauses of a ``MERGE INTO`` statement, built the way Delta's ``DeltaMergeBuilder`` reads
    (``m.whenMatchedDelete(...).whenNotMatchedInsertAll()``) but rendered as SQL, which a Spark
    Connect session runs without Delta's Python API. Conditions and values are SQL over the
    aliases ``t`` (target) and ``s`` (source)."""

    def __init__(self) -> None:
        self.clauses: list[str] = []

    @staticmethod
    def _when(head: str, condition: str | None) -> str:
        return f"{head} AND ({condition})" if condition else head

    @staticmethod
    def _assign(values: dict[str, str]) -> list[tuple[str, str]]:
        return [(f"`{col}`" if not col.startswith("`") else col, str(expr)) for col, expr in values.items()]

    def whenMatchedDelete(self, condition: str | None = None) -> "MergeSql":  # noqa: N802 - Delta's names
        self.clauses.append(f"{self._when('WHEN MATCHED', condition)} THEN DELETE")
        return self

    def whenMatchedUpdate(self, condition: str | None = None, set: dict[str, str] | None = None) -> "MergeSql":  # noqa: N802, A002
        sets = ", ".join(f"t.{c} = {e}" for c, e in self._assign(set or {}))
        self.clauses.append(f"{self._when('WHEN MATCHED', condition)} THEN UPDATE SET {sets}")
        return self

    def whenMatchedUpdateAll(self, condition: str | None = None) -> "MergeSql":  # noqa: N802
        self.clauses.append(f"{self._when('WHEN MATCHED', condition)} THEN UPDATE SET *")
        return self

    def whenNotMatchedInsert(self, condition: str | None = None, values: dict[str, str] | None = None) -> "MergeSql":  # noqa: N802
        pairs = self._assign(values or {})
        cols, exprs = ", ".join(c for c, _ in pairs), ", ".join(e for _, e in pairs)
        self.clauses.append(f"{self._when('WHEN NOT MATCHED', condition)} THEN INSERT ({cols}) VALUES ({exprs})")
        return self

    def whenNotMatchedInsertAll(self, condition: str | None = None) -> "MergeSql":  # noqa: N802
        self.clauses.append(f"{self._when('WHEN NOT MATCHED', condition)} THEN INSERT *")
        return self


def source_values(columns: Sequence[str]) -> dict[str, str]:
    """``{column: "s.`column`"}``: a MERGE clause that copies these columns from the source."""
    return {c: f"s.`{c}`" for c in columns}


def delta_ref(path: str) -> str:
    """A Delta table by path in SQL (``delta.`<path>```); the lakehouse path is checked free of
    quotes and backticks by :mod:`sda.config.settings`."""
    if "`" in path:
        raise ValueError(f"table path {path!r} holds a backtick")
    return f"delta.`{path}`"


_VIEW_SEQ = iter(range(1, 1 << 62))


def merge(spark: "SparkSession", table: str, settings: Settings, source: "DataFrame",
          clauses: Callable[[MergeSql], MergeSql]) -> dict[str, int]:
    """``MERGE INTO table t USING source s ON <key and prune bounds>`` with the clauses ``clauses``
    adds, retried on a write conflict (:func:`with_conflict_retry`). Returns Delta's counts
    (``num_affected_rows``, ``num_inserted_rows``, ``num_updated_rows``, ``num_deleted_rows``)."""
    spec = TABLES[table]
    if spec.prune:
        # the prune bounds and the MERGE both read the source: computed once, not twice
        source = source.localCheckpoint()
    on = merge_condition(spec, source)
    sql_clauses = " ".join(clauses(MergeSql()).clauses)
    view = f"sda_merge_{table}_{os.getpid()}_{next(_VIEW_SEQ)}"
    source.createOrReplaceTempView(view)
    statement = f"MERGE INTO {delta_ref(spec.path(settings))} t USING {view} s ON {on} {sql_clauses}"

    def attempt() -> dict[str, int]:
        row = spark.sql(statement).first()
        return {k: int(v or 0) for k, v in row.asDict().items()} if row is not None else {}

    try:
        return with_conflict_retry(attempt, f"MERGE INTO {table}", attempts=CONFLICT_ATTEMPTS, backoff_s=CONFLICT_BACKOFF_S)
    finally:
        spark.catalog.dropTempView(view)


def update(spark: "SparkSession", table: str, settings: Settings, condition: str, values: dict[str, str]) -> int:
    """``UPDATE table SET ... WHERE condition`` (SQL expressions), retried on a write conflict;
    returns the number of rows updated."""
    sets = ", ".join(f"`{c}` = {e}" for c, e in values.items())
    statement = f"UPDATE {delta_ref(TABLES[table].path(settings))} SET {sets} WHERE {condition}"

    def attempt() -> int:
        row = spark.sql(statement).first()
        return int(row[0] or 0) if row is not None else 0

    return with_conflict_retry(attempt, f"UPDATE {table}", attempts=CONFLICT_ATTEMPTS, backoff_s=CONFLICT_BACKOFF_S)


def history(spark: "SparkSession", table: str, settings: Settings, limit: int | None = None) -> "DataFrame":
    """``DESCRIBE HISTORY`` of a registered table (newest first)."""
    return spark.sql(f"DESCRIBE HISTORY {delta_ref(TABLES[table].path(settings))}" + (f" LIMIT {int(limit)}" if limit else ""))


_BOUND_RE = re.compile(r"^-?\d{4,}-\d\d-\d\d( \d\d:\d\d:\d\d\.\d{6})?\Z")


def merge_condition(spec: TableSpec, source: "DataFrame | None" = None) -> str:
    """``t.k = s.k AND ...`` over the key, plus, for each of the table's ``prune`` columns, equality
    and the source's [min, max] as literals: Delta prunes partitions and skips files by those, so a
    MERGE reads the part of the table the batch touches instead of all of it."""
    from pyspark.sql import functions as F

    if not spec.key:
        raise ValueError(f"table {spec.name} has no key to merge on")
    terms = [f"t.`{k}` = s.`{k}`" for k in spec.key]
    if source is not None and spec.prune:
        aggs = []
        for col in spec.prune:
            kind = spec.schema[col].dataType.typeName()
            fmt = "yyyy-MM-dd" if kind == "date" else "yyyy-MM-dd HH:mm:ss.SSSSSS"  # session time zone is UTC
            aggs += [F.date_format(F.min(col), fmt).alias(f"lo_{col}"), F.date_format(F.max(col), fmt).alias(f"hi_{col}")]
        bounds = source.agg(*aggs).first()
        for col in spec.prune:
            lo, hi = bounds[f"lo_{col}"], bounds[f"hi_{col}"]
            if lo is None:
                continue  # empty source: nothing to prune by
            literal = "DATE" if spec.schema[col].dataType.typeName() == "date" else "TIMESTAMP"
            for value in (lo, hi):  # Spark's own formatting of a date/timestamp: digits and separators only
                if not _BOUND_RE.match(value):
                    raise ValueError(f"table {spec.name}: prune bound {value!r} of {col} is not a formatted {literal}")
            if col not in spec.key:
                terms.append(f"t.`{col}` = s.`{col}`")
            terms.append(f"t.`{col}` BETWEEN {literal}'{lo}' AND {literal}'{hi}'")
    return " AND ".join(terms)


def merge_new(spark: "SparkSession", df: "DataFrame", table: str, settings: Settings) -> None:
    """Insert the rows of ``df`` whose key is not in ``table`` yet: replaying the same rows is a no-op."""
    spec = TABLES[table]
    source = df.select(*[f.name for f in spec.schema.fields]).dropDuplicates(list(spec.key))
    merge(spark, table, settings, source, lambda m: m.whenNotMatchedInsertAll())


def upsert(spark: "SparkSession", df: "DataFrame", table: str, settings: Settings) -> None:
    """Insert or replace rows by key (state that later runs refine)."""
    spec = TABLES[table]
    source = df.select(*[f.name for f in spec.schema.fields]).dropDuplicates(list(spec.key))
    merge(spark, table, settings, source, lambda m: m.whenMatchedUpdateAll().whenNotMatchedInsertAll())


def write_rows(spark: "SparkSession", rows: "Sequence[tuple] | DataFrame", table: str, settings: Settings,
               *, replace: bool = True) -> None:
    """Write a few bookkeeping rows (a run's metrics, its check results, a batch's watermarks, ledger
    entries) with the semantics of :func:`upsert` (``replace``) or :func:`merge_new`, at the cost of an
    append: when no row of ``table`` shares a key with them -- the usual case, a first attempt -- they
    are appended (one blind-append commit, a few tenths of a second); otherwise (a retry, a rerun of
    the same run id) the keyed MERGE runs. ``rows`` are tuples in the table's column order, or a small
    DataFrame (collected here). Only for writers that are alone on their keys: two writers appending
    the same new key at the same moment would both append."""
    from functools import reduce

    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    spec = TABLES[table]
    if isinstance(rows, DataFrame):
        rows = [tuple(r) for r in rows.select(*spec.schema.fieldNames()).collect()]
    if not rows:
        return
    df = spark.createDataFrame(list(rows), spec.schema)
    names = spec.schema.fieldNames()
    # superset test: a target row whose every key column takes one of the values of ``rows``
    keys = [F.col(f"`{k}`").isin(list({row[names.index(k)] for row in rows})) for k in spec.key]
    clash = bool(keys) and not spec.read(spark, settings).where(reduce(lambda a, b: a & b, keys)).isEmpty()
    if clash:
        (upsert if replace else merge_new)(spark, df, table, settings)
    else:
        df.write.format("delta").mode("append").save(spec.path(settings))


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
    if start == 0:
        # Everything from the beginning: the snapshot at ``end`` holds the same current rows, needs no
        # change-feed files (which VACUUM may have removed, see jobs/maintenance.py) and skips rows
        # that were later deleted.
        snapshot = spark.read.format("delta").option("versionAsOf", end).load(spec.path(settings))
        return snapshot.select(*[f.name for f in spec.schema.fields]), start, end
    changes = (
        _change_feed(spark, spec, settings, start, end)
        .where(F.col("_change_type").isin("insert", "update_postimage"))
        .select(*[f.name for f in spec.schema.fields])
    )
    return changes, start, end


def replay_rows(spark: "SparkSession", table: str, settings: Settings, args: argparse.Namespace) -> "DataFrame":
    """A replay's input: the rows of ``table`` (its current snapshot) for the event-time range
    ``[args.start, args.end)``. Bronze has no event time before parsing, so its rows are those that
    can hold one in the range: ingested at or after ``start - clock_skew_s`` (an event time is at most
    the clock skew after its ingest time; late records arrive *later*, so there is no upper bound)."""
    from pyspark.sql import functions as F

    spec = TABLES[table]
    df = spec.read(spark, settings)
    cols = spec.schema.fieldNames()
    if "event_time" in cols:
        if "event_date" in cols:  # partition pruning
            df = df.where(F.col("event_date").between(args.start.date(), args.end.date()))
        return df.where((F.col("event_time") >= F.lit(args.start)) & (F.col("event_time") < F.lit(args.end)))
    earliest = args.start - dt.timedelta(seconds=settings.clock_skew_s)
    return df.where((F.col("ingest_date") >= earliest.date()) & (F.col("ingest_time") >= F.lit(earliest)))


def changes_for(spark: "SparkSession", stage: str, table: str, settings: Settings, args: argparse.Namespace
                ) -> tuple["DataFrame", int, int]:
    """:func:`read_changes`, or in a replay :func:`replay_rows` (first == last == the table's version)."""
    if getattr(args, "replay", False):
        version = table_version(spark, table, settings)
        return replay_rows(spark, table, settings, args), version, version
    return read_changes(spark, stage, table, settings)


def net_changes_for(spark: "SparkSession", stage: str, table: str, settings: Settings, args: argparse.Namespace
                    ) -> tuple["DataFrame", "DataFrame", int, int]:
    """:func:`read_net_changes`, or in a replay the range's rows and nothing retracted."""
    if getattr(args, "replay", False):
        version = table_version(spark, table, settings)
        return (replay_rows(spark, table, settings, args), spark.createDataFrame([], TABLES[table].schema),
                version, version)
    return read_net_changes(spark, stage, table, settings)


def _change_feed(spark: "SparkSession", spec: TableSpec, settings: Settings, start: int, end: int) -> "DataFrame":
    """Every change of versions start..end, with Delta's _change_type and _commit_version columns."""
    return (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", start)
        .option("endingVersion", end)
        .load(spec.path(settings))
    )


def read_net_changes(spark: "SparkSession", stage: str, table: str, settings: Settings
                     ) -> tuple["DataFrame", "DataFrame", int, int]:
    """For a table whose rows are also updated and deleted: the *net* change per key since this
    stage's last consumed version -- (rows whose last change is an insert or update, rows whose last
    change is a delete (their pre-image), first version, last version). A row inserted and deleted
    within the range shows up only as deleted."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spec = TABLES[table]
    cols = [f.name for f in spec.schema.fields]
    start = last_consumed(spark, stage, table, settings) + 1
    end = table_version(spark, table, settings)
    empty = spark.createDataFrame([], spec.schema)
    if start > end or start == 0:
        current, _, _ = read_changes(spark, stage, table, settings)
        return current, empty, start, end
    feed = _change_feed(spark, spec, settings, start, end).where(
        F.col("_change_type").isin("insert", "update_postimage", "delete"))
    latest = Window.partitionBy(*spec.key).orderBy(F.col("_commit_version").desc())
    last_change = feed.withColumn("_rank", F.row_number().over(latest)).where(F.col("_rank") == 1)
    current = last_change.where(F.col("_change_type") != "delete").select(*cols)
    deleted = last_change.where(F.col("_change_type") == "delete").select(*cols)
    return current, deleted, start, end


def delete_keys(spark: "SparkSession", keys: "DataFrame", table: str, settings: Settings) -> None:
    """Delete the rows of ``table`` whose key is in ``keys`` (which also carries the prune columns)."""
    spec = TABLES[table]
    source = keys.select(*dict.fromkeys(list(spec.key) + list(spec.prune))).dropDuplicates(list(spec.key))
    merge(spark, table, settings, source, lambda m: m.whenMatchedDelete())


def commit_progress(spark: "SparkSession", stage: str, consumed: dict[str, int], run_id: str, settings: Settings) -> None:
    """Record, in one Delta commit (a blind append to the ``ops.progress`` log), that ``stage`` has
    consumed each table up to its version (:func:`run_stage` calls this after the stage's writes). A
    retry appends the same versions again, which changes nothing a reader sees; the maintenance job
    drops the superseded rows (:func:`compact_progress`)."""
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
        f"MERGE INTO {ref} t USING (SELECT stage, source_table, max_by(struct(updated, version), struct(updated, version)) AS last "
        f"FROM {ref} GROUP BY stage, source_table) m "
        "ON t.stage = m.stage AND t.source_table = m.source_table "
        "AND (t.updated < m.last.updated OR (t.updated = m.last.updated AND t.version < m.last.version)) "
        "WHEN MATCHED THEN DELETE"
    )

    def attempt() -> int:
        row = spark.sql(statement).first()
        return int(row["num_deleted_rows"] or 0) if row is not None else 0

    return with_conflict_retry(attempt, "compact ops.progress", attempts=CONFLICT_ATTEMPTS, backoff_s=CONFLICT_BACKOFF_S)
