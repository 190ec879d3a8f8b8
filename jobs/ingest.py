"""ingest: landing files -> bronze (one append-only table per landing kind) + quarantine, and space weather.

    python jobs/ingest.py --start ISO --end ISO --run-id ID

Landing layout: ``<landing>/<kind>/**/<name><suffix>`` (:mod:`sda.pipeline.landing`); other
top-level directories (``_truth/``) and temporary files (``.name``, ``*.tmp``) are ignored.
A file is taken when its mtime is <= ``--end`` and its (relative path, sha256) is not in the
``ingested_files`` ledger yet. A file whose (relative path, size, mtime) the ledger already holds is
known without being read or hashed: a run's cost follows the new files, not the landing zone's size.

Every record is accounted for, per file: the ledger row's ``records`` (to bronze) + ``quarantined``
are the file's records. A file refused whole before it is read (a symlink leading out of the landing
zone, a FIFO: :func:`sda.pipeline.landing.refusal`) is one quarantine row with the reason and no
bytes, and a ledger row whose ``file_sha256`` is that of the reason (its content is never read). A
TDM read leniently (tabs, a byte-order mark: :mod:`sda.transforms.tdm_read`) is named in the metrics
(``lenient_reads``: file -> what), which the run report shows.

CelesTrak's CSSI space-weather files (``<landing>/space_weather/**/*.txt``) go through the same ledger,
a bronze record per line (``space_weather_lines``); their 3-hour intervals (:mod:`sda.transforms.cssi`)
are MERGEd into ``silver.space_weather`` in the same batch, the newest issue winning per interval
(:mod:`sda.pipeline.space_weather`), and the metrics say what the run received (``space_weather``).

Exactly once, through a crash at any point:

1. *plan*: the new files are written to the ledger as one batch (``batch_id`` = last + 1,
   status ``planned``) with the ingest time and run id the batch's rows will carry; a backlog larger
   than ``ingest_batch_mb`` is split into several batches, each planned and written in turn, so the
   task holds one batch at a time: its records (a file's bytes are let go once it is split into
   records) and, per kind, the Arrow table Spark Connect sends;
2. *append*: each kind's bronze rows are appended with Delta's idempotent writes
   (``txnAppId`` = :data:`APP_ID`, ``txnVersion`` = batch id): Delta itself skips an append it has
   already committed for that batch;
3. *quarantine*: refused records are MERGEd on their deterministic ``quarantine_id`` (before it, the
   space-weather intervals on ``interval_start``: a repeat changes nothing);
4. *done*: the batch's ledger rows are marked ``done``.

A rerun first replays any ``planned`` batch (same id, same rows) before planning new files.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import functools
import hashlib
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sda.config.settings import Settings
from sda.lake import schemas
from sda.lake.tables import BRONZE_BY_LANDING_KIND, TABLES
from sda.pipeline import faults, logcontext, runtime, sinks, space_weather
from sda.pipeline.arguments import stage_parser, with_defaults
from sda.pipeline.landing import discover, discover_stat, inside, is_candidate, refusal  # noqa: F401 (ingest's API)
from sda.transforms import cssi, wire

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

STAGE = "ingest"
APP_ID = "sda-ingest"  # Delta txnAppId of the bronze appends; txnVersion is the ledger batch id
log = logging.getLogger("sda.ingest")


@dataclasses.dataclass(frozen=True)
class LandedFile:
    path: str  # relative to the landing root, '/'-separated (the ledger key)
    kind: str
    sha256: str
    size: int
    data: bytes
    mtime_us: int | None = None  # modification time when read (epoch microseconds)


@dataclasses.dataclass(frozen=True)
class ParsedFile:
    """A landed file split into what ingest writes, without its bytes: a batch holds its files in this
    form, each accepted record once, in Arrow (no Python object per record), which Spark Connect
    sends as it is."""
    path: str
    kind: str
    sha256: str
    size: int
    mtime_us: int | None
    accepted: "pa.Table"  # bronze_id, record_no, payload of the records bronze takes, in file order
    refused: list[tuple[int | None, str, bytes]]  # (record number, reason, the line as landed): quarantine
    lenient: str | None = None  # what of the file was read leniently, not as its standard writes it
    space_weather: "pa.Table | None" = None  # a CSSI file's 3-hour intervals (cssi.interval_table)


def parse_file(f: LandedFile) -> ParsedFile:

    nos, ids, payloads, refused, lenient, versions, extras = [], [], [], [], None, [], []
    weather = cssi.parse(f.data) if f.kind == "space_weather" else None
    for rec in weather.records if weather else wire.file_records(f.kind, f.data):
        if rec.reason is None:
            nos.append(rec.record_no)
            ids.append(bronze_id(f.sha256, rec.record_no if rec.ident is None else rec.ident))
            payloads.append(rec.text)
            versions.append(rec.version)
            extras.append(None if rec.extras is None else list(rec.extras.items()))
            lenient = lenient or rec.lenient
        else:
            refused.append((rec.record_no, rec.reason, rec.raw))
    accepted = _accepted_table(ids, nos, payloads, versions, extras)
    intervals = weather and cssi.interval_table(weather, f.path, f.sha256, lambda no: bronze_id(f.sha256, no))
    return ParsedFile(f.path, f.kind, f.sha256, f.size, f.mtime_us, accepted, refused, lenient, intervals)


def _accepted_table(ids: list, nos: list, payloads: list, versions: list, extras: list) -> "pa.Table":
    import pyarrow as pa

    return pa.table({"bronze_id": pa.array(ids, pa.string()), "record_no": pa.array(nos, pa.int64()),
                     "payload": pa.array(payloads, pa.string()), "format_version": pa.array(versions, pa.string()),
                     "extra_fields": pa.array(extras, pa.map_(pa.string(), pa.string()))})


def refused_file(rel: str, kind: str, size: int, mtime_us: int, reason: str) -> ParsedFile:
    """A file refused whole before it is read: no bronze record, one quarantine row (no record number,
    no bytes), keyed in the ledger by the sha256 of the reason: what was refused, never the content."""
    empty = _accepted_table([], [], [], [], [])
    return ParsedFile(rel, kind, hashlib.sha256(reason.encode()).hexdigest(), size, mtime_us, empty,
                      [(None, reason, b"")])


# --- pure helpers ----------------------------------------------------------------------------------

def bronze_id(file_sha256: str, record_no: int | str) -> str:
    return hashlib.sha256(f"{file_sha256}:{record_no}".encode()).hexdigest()


def ingest_quarantine_id(file_path: str, file_sha256: str, record_no: int) -> str:
    # same formula as sda.transforms.envelope.quarantine_id: sha256("stage:part:part...")
    return hashlib.sha256(f"{STAGE}:{file_path}:{file_sha256}:{record_no}".encode()).hexdigest()


def batch_rows(
    files: list[ParsedFile], ingest_time: dt.datetime, run_id: str, batch_id: int = 0
) -> tuple[dict[str, "pa.Table"], list[tuple], dict[str, tuple[int, int]]]:
    """The bronze rows per kind (an Arrow table of :data:`schemas.BRONZE`'s columns, a chunk per file:
    the files' own arrays, not copied), the quarantine rows, and (bronze records, quarantined) per file."""
    import pyarrow as pa

    chunks: dict[str, list[pa.Table]] = {kind: [] for kind in schemas.LANDING_KINDS}
    quarantine: list[tuple] = []
    counts: dict[str, tuple[int, int]] = {}
    for f in files:
        chunks[f.kind].append(_bronze_chunk(f, ingest_time, run_id, batch_id))
        quarantine += [(ingest_quarantine_id(f.path, f.sha256, no), STAGE, reason, f.kind, f.path, no, None, None,
                        bytearray(raw), ingest_time, run_id) for no, reason, raw in f.refused]
        counts[f.path] = (f.accepted.num_rows, len(f.refused))
    bronze = {kind: pa.concat_tables(tables) if tables else _bronze_arrow_schema().empty_table()
              for kind, tables in chunks.items()}
    return bronze, quarantine, counts


@functools.cache  # one per process: _bronze_chunk asks for it once per file
def _bronze_arrow_schema() -> "pa.Schema":
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schemas.BRONZE)


def _bronze_chunk(f: ParsedFile, ingest_time: dt.datetime, run_id: str, batch_id: int) -> "pa.Table":
    """``f``'s accepted records as bronze rows: its own arrays, with the batch's constants beside them."""
    import pyarrow as pa

    schema = _bronze_arrow_schema()

    def constant(name: str, value: Any) -> "pa.Array":
        return pa.repeat(pa.scalar(value, schema.field(name).type), f.accepted.num_rows)

    return pa.table([f.accepted["bronze_id"], constant("sensor_kind", f.kind), constant("source_file", f.path),
                     f.accepted["record_no"], f.accepted["payload"], constant("ingest_time", ingest_time),
                     constant("ingest_date", ingest_time.date()), constant("run_id", run_id),
                     constant("ingest_batch", batch_id), f.accepted["format_version"], f.accepted["extra_fields"]],
                    schema=schema)


# --- the ledger ------------------------------------------------------------------------------------

def _ledger(spark: SparkSession, settings: Settings) -> DataFrame:
    ledger = TABLES["ingested_files"].read(spark, settings)
    if "file_mtime_us" not in ledger.columns:  # a ledger made before that column (it gains it on write)
        ledger = ledger.withColumn("file_mtime_us", F.lit(None).cast("long"))
    return ledger


def planned_rows(spark: SparkSession, settings: Settings) -> list[dict[str, Any]]:
    """The ledger rows of batches a crashed run planned and did not finish (normally none)."""
    return [r.asDict() for r in _ledger(spark, settings).where(F.col("status") == "planned").collect()]


def last_batch_id(spark: SparkSession, settings: Settings) -> int:
    return _ledger(spark, settings).agg(F.max("batch_id")).first()[0] or 0


def unseen_files(spark: SparkSession, settings: Settings,
                 listing: list[tuple[str, str, str, os.stat_result]]) -> tuple[set[str], dict[tuple[str, str], dict]]:
    """Which listed files the ledger does not hold by (path, size, mtime) -- those are read and hashed
    -- and the ledger's rows for those paths by (path, sha256). The comparison is a join on the
    server: the client sends the listing and gets back only the unseen files, so a run's cost does
    not grow with the ledger (every file ever landed)."""
    if not listing:
        return set(), {}
    files = spark.createDataFrame([(rel, stat.st_size, stat.st_mtime_ns // 1000) for rel, _, _, stat in listing],
                                  "file_path string, file_size long, file_mtime_us long")
    ledger = _ledger(spark, settings)
    unseen = files.join(ledger.select("file_path", "file_size", "file_mtime_us"),
                        ["file_path", "file_size", "file_mtime_us"], "left_anti").select("file_path")
    rows = unseen.join(ledger, "file_path", "left").collect()
    known = {(r["file_path"], r["file_sha256"]): r.asDict() for r in rows if r["file_sha256"] is not None}
    return {r["file_path"] for r in rows}, known


def write_ledger(spark: SparkSession, settings: Settings, rows: list[dict[str, Any]]) -> None:
    """Insert or replace ledger rows by (file_path, file_sha256): new files (the plan) cost an append."""
    # a ledger made before the file_mtime_us column gains it with this write
    spark.conf.set("spark.databricks.delta.schema.autoMerge.enabled", "true")
    try:
        sinks.write_rows(spark, [tuple(r.get(f.name) for f in schemas.INGESTED_FILES.fields) for r in rows],
                           "ingested_files", settings)
    finally:
        spark.conf.unset("spark.databricks.delta.schema.autoMerge.enabled")


def plan_batch(spark: SparkSession, settings: Settings, rows: list[dict[str, Any]]) -> None:
    write_ledger(spark, settings, rows)


def mark_done(spark: SparkSession, settings: Settings, rows: list[dict[str, Any]]) -> None:
    write_ledger(spark, settings, [{**r, "status": "done"} for r in rows if r["status"] == "planned"])


# --- the batch -------------------------------------------------------------------------------------

def append_bronze(spark: SparkSession, settings: Settings, kind: str, rows: "pa.Table", batch_id: int) -> None:
    df = spark.createDataFrame(rows, schemas.BRONZE)
    sinks.append_once(df, BRONZE_BY_LANDING_KIND[kind].name, settings, APP_ID, batch_id)


def write_quarantine(spark: SparkSession, settings: Settings, rows: list[tuple]) -> None:
    if rows:
        sinks.merge_new(spark, spark.createDataFrame(rows, schemas.QUARANTINE), "quarantine", settings)


def execute_batch(spark: SparkSession, settings: Settings, plan: list[dict[str, Any]],
                  files: list[ParsedFile], rows: tuple[dict[str, "pa.Table"], list[tuple]] | None = None,
                  ) -> dict[str, int]:
    """Append and quarantine the planned ``files`` (steps 2-4); safe to repeat for the same plan.
    ``rows``: the batch's (bronze rows per kind, quarantine rows) when the caller built them already."""
    batch_id, run_id = plan[0]["batch_id"], plan[0]["run_id"]
    logcontext.set_batch(f"landing#{batch_id}")
    # The ledger hands back a naive local-time value; as aware UTC it round-trips exactly and its
    # date is the UTC date, whatever the driver's time zone.
    ingest_time = plan[0]["ingest_time"].astimezone(dt.timezone.utc)
    bronze, quarantine = rows if rows is not None else batch_rows(files, ingest_time, run_id, batch_id)[:2]
    faults.checkpoint("ingest:before-write")
    for kind in schemas.LANDING_KINDS:
        if bronze[kind].num_rows:
            append_bronze(spark, settings, kind, bronze[kind], batch_id)
            faults.checkpoint(f"ingest:after-{kind}")
    weather = [f.space_weather for f in files]
    space_weather.merge_intervals(spark, settings, weather, ingest_time, run_id, batch_id)
    write_quarantine(spark, settings, quarantine)
    faults.checkpoint("ingest:after-quarantine")
    mark_done(spark, settings, plan)
    out = sum(table.num_rows for table in bronze.values())
    issues = [space_weather.issue_of(f.space_weather) for f in files if f.kind == "space_weather"]
    return {"records_in": out + len(quarantine), "records_out": out, "quarantined": len(quarantine), "duplicates": 0,
            "space_weather_files": issues}


def load_file(landing: Path, rel: str, kind: str) -> LandedFile | None:
    path = landing / rel
    if refusal(landing, path):  # swapped for a symlink leading out (or a FIFO) since it was listed or planned
        log.warning("landing file %s in %s: %s", rel, landing, refusal(landing, path))
        return None
    try:
        mtime_us = path.stat().st_mtime_ns // 1000
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return LandedFile(rel, kind, hashlib.sha256(data).hexdigest(), len(data), data, mtime_us)


def replay_planned(spark: SparkSession, settings: Settings,
                   ledger: list[dict[str, Any]]) -> tuple[dict[str, int], list[int]]:
    """Finish batches a crashed run planned but did not mark done (oldest first)."""
    totals = {"records_in": 0, "records_out": 0, "quarantined": 0, "duplicates": 0, "files_replayed": 0,
              "files_vanished": 0, "space_weather_files": []}
    planned = sorted({r["batch_id"] for r in ledger if r["status"] == "planned"})
    for batch_id in planned:
        plan = sorted((r for r in ledger if r["batch_id"] == batch_id and r["status"] == "planned"),
                      key=lambda r: r["file_path"])
        files, kept = [], []
        for row in plan:
            f = _landed(settings.landing, row["file_path"], row["sensor_kind"])
            if f is None or f.sha256 != row["file_sha256"]:
                # The content planned is gone: whatever of it was appended stays; a changed file is a
                # new (path, sha256) and is ingested as such by the planning step.
                log.warning("planned file %s changed or vanished before replay of batch %s", row["file_path"], batch_id)
                write_ledger(spark, settings, [{**row, "status": "vanished"}])
                totals["files_vanished"] += 1
                continue
            files.append(f if isinstance(f, ParsedFile) else parse_file(f))
            kept.append(row)
        if kept:
            metrics = execute_batch(spark, settings, kept, files)
            for key, value in metrics.items():
                totals[key] += value
            totals["files_replayed"] += len(kept)
    return totals, planned


def run(spark: SparkSession, settings: Settings, args: argparse.Namespace) -> dict[str, Any]:
    args = with_defaults(args, parser())
    if args.replay:
        # bronze is the replayable log: a replay (or backfill) recomputes from it and never re-reads
        # the landing zone (new files wait for the next scheduled run)
        return {"files_seen": 0, "files_new": 0, "skipped": "replay: bronze is the log"}
    metrics: dict[str, Any] = {"files_seen": 0, "files_new": 0, "files_already_ingested": 0, "duplicates": 0}
    logcontext.set_batch("landing")  # the landing zone, until a batch of its files is planned
    replay, replayed_batches = replay_planned(spark, settings, planned_rows(spark, settings))
    metrics.update(replay)

    # a file whose (path, size, mtime) the ledger holds is not read again (a rewritten file has a new
    # mtime, or a new size, and is read, hashed and judged by its content)
    refused: list[tuple[str, str, str, os.stat_result, str]] = []  # refused before reading, with why
    listing = discover_stat(settings.landing, args.end, refused)
    reasons = {rel: reason for rel, _, _, _, reason in refused}
    listing += [entry[:4] for entry in refused]
    unseen, known = unseen_files(spark, settings, listing)
    metrics.update(files_new=0, files_refused_unread=0, lenient_reads={}, batches=list(replayed_batches))
    limit = settings.ingest_batch_mb * 1e6
    batch_id = None  # the last batch id written, read from the ledger when the first batch is

    def write(files: list[ParsedFile]) -> None:
        nonlocal batch_id
        batch_id = (last_batch_id(spark, settings) if batch_id is None else batch_id) + 1
        _ingest_batch(spark, settings, args.run_id, files, batch_id, metrics)

    new_files, touched, size = [], [], 0
    # A backlog goes in landing order (modification time, then path): its batches are the arrival
    # order the watermarks judge lateness by (sda.pipeline.watermarks), so catching up after an outage
    # judges it about as keeping up would have. In path order a backlog of a day went sensor by sensor,
    # and every sensor in a later batch arrived behind the day's newest: a third of a 24-h backlog
    # was filed as late (bench/throughput.py).
    for rel, kind, _, stat in sorted(listing, key=lambda f: (f[3].st_mtime_ns, f[0])):
        if rel not in unseen:
            metrics["files_seen"] += 1
            metrics["files_already_ingested"] += 1
            continue
        if new_files and size + stat.st_size > limit:  # this batch is full: written before reading on
            write(new_files)
            new_files, size = [], 0
        f = _landed(settings.landing, rel, kind, reasons.get(rel))
        if f is None:  # removed between listing and reading
            continue
        metrics["files_seen"] += 1
        if (f.path, f.sha256) in known:
            metrics["files_already_ingested"] += 1
            touched.append({**known[(f.path, f.sha256)], "file_mtime_us": f.mtime_us})
        else:  # a read file's bytes are let go: the batch keeps its records only
            new_files.append(f if isinstance(f, ParsedFile) else parse_file(f))
            size += f.size
    if new_files:
        write(new_files)
    # known content under a new mtime (touched, copied back): the ledger learns the mtime, and the
    # next run does not read the file again
    write_ledger(spark, settings, touched)
    if issues := metrics.pop("space_weather_files"):  # the CSSI files taken: what the run report shows
        metrics["space_weather"] = space_weather.run_summary(spark, settings, args.start, args.end, issues)
    return metrics


def _landed(landing: Path, rel: str, kind: str, reason: str | None = None) -> LandedFile | ParsedFile | None:
    """A listed file read (:func:`load_file`), or refused before reading (``reason``, or a refusal found
    as it is opened: swapped for a symlink leading out since it was listed or planned), or None when
    it is gone."""
    if reason is None:
        f = load_file(landing, rel, kind)
        reason = refusal(landing, landing / rel) if f is None else None
        if reason is None:
            return f
    try:
        st = os.lstat(landing / rel)
    except OSError:
        return None
    return refused_file(rel, kind, st.st_size, st.st_mtime_ns // 1000, reason)


def _ingest_batch(spark: SparkSession, settings: Settings, run_id: str, files: list[ParsedFile],
                  batch_id: int, metrics: dict[str, Any]) -> None:
    """Plan ``files`` as ledger batch ``batch_id`` and write it (steps 1-4); adds to ``metrics``."""
    ingest_time = dt.datetime.now(dt.timezone.utc)
    bronze, quarantine, counts = batch_rows(files, ingest_time, run_id, batch_id)
    plan = [
        {"file_path": f.path, "file_sha256": f.sha256, "file_size": f.size, "sensor_kind": f.kind,
         "records": counts[f.path][0], "quarantined": counts[f.path][1], "ingest_time": ingest_time,
         "run_id": run_id, "batch_id": batch_id, "status": "planned", "file_mtime_us": f.mtime_us}
        for f in files
    ]
    plan_batch(spark, settings, plan)
    batch = execute_batch(spark, settings, plan, files, (bronze, quarantine))
    for key, value in batch.items():
        metrics[key] += value
    metrics["files_new"] += len(files)
    metrics["files_refused_unread"] += sum(1 for f in files if f.refused and f.refused[0][0] is None)
    metrics["lenient_reads"].update({f.path: f.lenient for f in files if f.lenient})
    metrics["batches"].append(batch_id)
    runtime.progress(STAGE, "batch %d: %d files, %d records", batch_id, len(files), batch["records_in"])


def parser() -> argparse.ArgumentParser:
    return stage_parser(STAGE, "landing files -> bronze tables, exactly once per file")


def main(argv: list[str] | None = None, settings: Settings | None = None,
         spark: SparkSession | None = None) -> dict[str, Any]:
    return runtime.run_stage(STAGE, argv, run, parser(), settings=settings, spark=spark)


if __name__ == "__main__":
    main(sys.argv[1:])
