"""Idempotent Delta sinks: how a stage writes so that replaying the same input changes nothing.

* :func:`merge_new` inserts the keys not present yet; :func:`upsert` replaces state by key with
  values recomputed from durable tables; :func:`delete_keys` removes rows by key;
* :func:`write_rows` gives a few bookkeeping rows those semantics at the cost of an append;
* :func:`append_once` appends with Delta's ``txnAppId``/``txnVersion``, which Delta itself skips when
  that (app, version) is already committed;
* :func:`merge` and :func:`update` run one SQL statement (``MERGE INTO`` built with :class:`MergeSql`,
  ``UPDATE``), pruned by the source's bounds (:func:`merge_condition`) and retried when another
  writer's commit wins (:func:`with_conflict_retry`).
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, TypeVar

from sda.config.settings import Settings
from sda.lake.spark import temporary_conf
from sda.lake.tables import TABLES, TableSpec

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("sda")

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
MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"


def merge(spark: "SparkSession", table: str, settings: Settings, source: "DataFrame",
          clauses: Callable[[MergeSql], MergeSql]) -> dict[str, int]:
    """``MERGE INTO table t USING source s ON <key and prune bounds>`` with the clauses ``clauses``
    adds, retried on a write conflict (:func:`with_conflict_retry`). Returns Delta's counts
    (``num_affected_rows``, ``num_inserted_rows``, ``num_updated_rows``, ``num_deleted_rows``), or
    nothing when the table's prune bounds show the source empty: that MERGE is not run."""
    spec = TABLES[table]
    own_snapshot = False
    if spec.prune:
        # the prune bounds and the MERGE both read the source: computed once, not twice. This eager
        # local checkpoint is the snapshot Delta would otherwise take itself (its "auto" source
        # materialization copies any source that is not a plain Delta scan), so Delta is told not to
        # take a second copy: a checkpoint cannot be recomputed, only read or lost, which fails the MERGE.
        source = source.localCheckpoint()
        own_snapshot = True
    on = merge_condition(spec, source)
    if on is None:  # an empty source: no clause can apply (MergeSql has no NOT MATCHED BY SOURCE)
        return {}
    sql_clauses = " ".join(clauses(MergeSql()).clauses)
    view = f"sda_merge_{table}_{os.getpid()}_{next(_VIEW_SEQ)}"
    source.createOrReplaceTempView(view)
    # WITH SCHEMA EVOLUTION: a table made before a column was registered gains it (the source has the spec's
    # columns, no others), its earlier rows reading null
    statement = (f"MERGE WITH SCHEMA EVOLUTION INTO {delta_ref(spec.path(settings))} t USING {view} s ON {on} "
                 f"{sql_clauses}")

    def attempt() -> dict[str, int]:
        with temporary_conf(spark, MATERIALIZE_SOURCE, "none") if own_snapshot else nullcontext():
            row = spark.sql(statement).first()
        return {k: int(v or 0) for k, v in row.asDict().items()} if row is not None else {}

    try:
        return with_conflict_retry(attempt, f"MERGE INTO {table}", attempts=CONFLICT_ATTEMPTS,
                                   backoff_s=CONFLICT_BACKOFF_S)
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

_BOUND_RE = re.compile(r"^-?\d{4,}-\d\d-\d\d( \d\d:\d\d:\d\d\.\d{6})?\Z")


def merge_condition(spec: TableSpec, source: "DataFrame | None" = None) -> str | None:
    """``t.k = s.k AND ...`` over the key, plus, for each of the table's ``prune`` columns, equality
    and the source's [min, max] as literals: Delta prunes partitions and skips files by those, so a
    MERGE reads the part of the table the batch touches instead of all of it. None when those bounds
    show the source empty: a MERGE of it would change nothing, yet without bounds it would read the
    whole table."""
    from pyspark.sql import functions as F

    if not spec.key:
        raise ValueError(f"table {spec.name} has no key to merge on")
    terms = [f"t.`{k}` = s.`{k}`" for k in spec.key]
    if source is not None and spec.prune:
        aggs = []
        for col in spec.prune:
            kind = spec.schema[col].dataType.typeName()
            fmt = "yyyy-MM-dd" if kind == "date" else "yyyy-MM-dd HH:mm:ss.SSSSSS"  # session time zone is UTC
            aggs += [F.date_format(F.min(col), fmt).alias(f"lo_{col}"),
                     F.date_format(F.max(col), fmt).alias(f"hi_{col}")]
        bounds = source.agg(*aggs, F.count(F.lit(1)).alias("rows")).first()
        if not bounds["rows"]:
            return None
        for col in spec.prune:
            lo, hi = bounds[f"lo_{col}"], bounds[f"hi_{col}"]
            if lo is None:
                continue  # the column is null in every source row: nothing to prune by
            literal = "DATE" if spec.schema[col].dataType.typeName() == "date" else "TIMESTAMP"
            for value in (lo, hi):  # Spark's own formatting of a date/timestamp: digits and separators only
                if not _BOUND_RE.match(value):
                    raise ValueError(f"table {spec.name}: prune bound {value!r} of {col} is not a formatted {literal}")
            if col not in spec.key:
                terms.append(f"t.`{col}` = s.`{col}`")
            terms.append(f"t.`{col}` BETWEEN {literal}'{lo}' AND {literal}'{hi}'")
    return " AND ".join(terms)


def _keyed_source(df: "DataFrame", spec: TableSpec, unique: bool) -> "DataFrame":
    """``df`` in the table's columns, one row per key: ``unique`` says the caller's rows already are (a
    ``row_number() == 1`` per key, one output row per deduplicated input), which saves a shuffle of
    the whole batch."""
    source = df.select(*[f.name for f in spec.schema.fields])
    return source if unique else source.dropDuplicates(list(spec.key))


def merge_new(spark: "SparkSession", df: "DataFrame", table: str, settings: Settings, *, unique: bool = False) -> None:
    """Insert the rows of ``df`` whose key is not in ``table`` yet: replaying the same rows is a no-op."""
    source = _keyed_source(df, TABLES[table], unique)
    merge(spark, table, settings, source, lambda m: m.whenNotMatchedInsertAll())


def upsert(spark: "SparkSession", df: "DataFrame", table: str, settings: Settings, *, unique: bool = False) -> None:
    """Insert or replace rows by key (state that later runs refine)."""
    source = _keyed_source(df, TABLES[table], unique)
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
    is skipped by Delta itself, so a retried append never doubles an append-only table. A table made
    before a column was registered gains it with this append (``mergeSchema``: Delta's schema evolution;
    the earlier rows read it as null)."""
    spec = TABLES[table]
    (
        df.select(*[f.name for f in spec.schema.fields])
        .write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", version)
        .option("mergeSchema", "true")
        .save(spec.path(settings))
    )


def delete_keys(spark: "SparkSession", keys: "DataFrame", table: str, settings: Settings) -> None:
    """Delete the rows of ``table`` whose key is in ``keys`` (which also carries the prune columns)."""
    spec = TABLES[table]
    source = keys.select(*dict.fromkeys(list(spec.key) + list(spec.prune))).dropDuplicates(list(spec.key))
    merge(spark, table, settings, source, lambda m: m.whenMatchedDelete())

