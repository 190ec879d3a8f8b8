"""maintenance: compaction keeps every row in fewer files, VACUUM's retention spares change-feed
consumers (pure guard with hand-computed numbers, and on a real table's log), dry runs change
nothing, bad table names are refused."""

from __future__ import annotations

import datetime as dt
import os
import re
from pathlib import Path

import pytest

from jobs import maintenance as job
from sda.lake.tables import TABLES, ensure_tables
from sda.pipeline import changefeed
from tests.seed import append_rows

PROJECT_ROOT = Path(__file__).resolve().parents[2]
UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
H = dt.timedelta(hours=1)
INTERVAL = ["--start", "2026-11-21T00:00:00Z", "--end", "2026-11-22T00:00:00Z"]


def argv(run_id, *extra):
    return [*INTERVAL, "--run-id", run_id, *extra]


def data_files(table_dir: Path) -> set[str]:
    """Parquet files on disk, change-data files and the log excluded."""
    return {str(p.relative_to(table_dir)) for p in table_dir.rglob("*.parquet")
            if "_delta_log" not in p.parts and "_change_data" not in p.parts}


# --- pure decisions ------------------------------------------------------------------------------------

def test_retention_needed_hand_computed():
    now = dt.datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    # a consumer needs a version committed 200 h ago: 200 h + 1 h margin beats the configured 168 h
    assert job.retention_needed(now, now - 200 * H, 168) == 201
    # 100 h ago (+1 h) is inside the configured retention: nothing to widen
    assert job.retention_needed(now, now - 100 * H, 168) == 168
    assert job.retention_needed(now, None, 168) == 168
    # 167.5 h + 1 h = 168.5 h: rounded *up* (Delta would round 168.5 to the nearest hour)
    assert job.retention_needed(now, now - dt.timedelta(hours=167.5), 168) == 169
    assert job.retention_needed(now, now - 200 * H, 168, margin_h=0) == 200
    assert job.retention_needed(now, now - 200 * H, 240) == 240


def test_consumer_guard():
    commits = {0: T0, 1: T0 + H, 2: T0 + 2 * H, 3: T0 + 3 * H}
    # dedup consumed through version 1: it reads version 2 next, committed at T0 + 2 h
    assert job.consumer_guard("t", {"dedup": 1}, commits) == job.Guard(2, T0 + 2 * H, "dedup")
    # the laggier of two consumers decides
    assert job.consumer_guard("t", {"a": 2, "b": 0}, commits) == job.Guard(1, T0 + H, "b")
    # caught up (or no consumer at all): nothing to keep beyond the configured retention
    assert job.consumer_guard("t", {"a": 3}, commits) == job.Guard()
    assert job.consumer_guard("t", {}, commits) == job.Guard()
    # a consumer that never ran reads from version 0: no VACUUM, and the reason names it
    never = job.consumer_guard("t", {"a": None, "b": 3}, commits)
    assert never.skip_reason and "a has not consumed t" in never.skip_reason and "version 0" in never.skip_reason
    # its next version has left the log (versions 0-4 cleaned up): no VACUUM, replay advised
    gone = job.consumer_guard("t", {"a": 2}, {5: T0 + 5 * H, 6: T0 + 6 * H})
    assert gone.needed_version == 3 and gone.lagging_stage == "a"
    assert "version 3" in gone.skip_reason and "replay" in gone.skip_reason
    # commit times out of order (clock skew): the earliest from the needed version on counts
    skewed = {1: T0, 2: T0 + 2 * H, 3: T0 + H}
    assert job.consumer_guard("t", {"a": 1}, skewed).needed_since == T0 + H


def test_interval_hours():
    assert job.interval_hours("interval 7 days", 1) == 168
    assert job.interval_hours("interval 30 days", 1) == 720
    assert job.interval_hours("12 hours", 1) == 12
    assert job.interval_hours("INTERVAL 1 WEEK", 1) == 168
    assert job.interval_hours("soon", 99) == 99
    assert job.interval_hours(None, 99) == 99


def test_compaction_candidates():
    files = ["file:/t/d=1/a.parquet", "file:/t/d=1/b.parquet", "file:/t/d=2/c.parquet", "file:/t/d=3/e.parquet",
             "file:/t/d=3/f.parquet", "file:/t/d=3/g.parquet"]
    assert job.compaction_candidates(files) == 5  # d=2 has one file: nothing to bin with
    assert job.compaction_candidates([]) == 0


def test_conflicts_are_retried_with_back_off():
    sleeps: list[float] = []
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] < 3:
            raise RuntimeError("[DELTA_CONCURRENT_APPEND.WITH_PARTITION_HINT] ConcurrentAppendException: "
                               "Files were added")
        return "done"

    assert job.with_conflict_retry(flaky, "OPTIMIZE t", backoff_s=5, sleep=sleeps.append) == "done"
    assert sleeps == [5, 10]

    sleeps.clear()

    def always():
        raise RuntimeError("ConcurrentDeleteReadException: This transaction attempted to read one or more files")

    with pytest.raises(RuntimeError, match="ConcurrentDeleteRead"):
        job.with_conflict_retry(always, "OPTIMIZE t", attempts=4, backoff_s=5, sleep=sleeps.append)
    assert sleeps == [5, 10, 20]

    sleeps.clear()

    def broken():
        raise ValueError("something else")

    with pytest.raises(ValueError):
        job.with_conflict_retry(broken, "OPTIMIZE t", sleep=sleeps.append)
    assert sleeps == []


def test_declared_consumers_match_the_jobs():
    """Every job that reads a change feed is declared, on tables it reads according to the topology."""
    from sda.pipeline.topology import STAGE_BY_NAME

    readers = set()
    for path in (PROJECT_ROOT / "jobs").glob("*.py"):
        text = path.read_text()
        if re.search(r"(read_(net_)?changes|(net_)?changes_for)\(", text):
            readers.add(re.search(r'^STAGE = "(\w+)"', text, re.M).group(1))
    declared = {stage for stages in job.CHANGE_FEED_CONSUMERS.values() for stage in stages}
    assert readers == declared == {"normalize", "dedup", "correlate", "fuse", "acquire"}
    for table, stages in job.CHANGE_FEED_CONSUMERS.items():
        assert table in TABLES
        for stage in stages:
            assert table in STAGE_BY_NAME[stage].inputs, (stage, table)


# --- arguments -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("tables", ["nosuch", "radar_frames,nosuch", " , "])
def test_unknown_table_is_refused(settings, capsys, tables):
    with pytest.raises(SystemExit) as exc:
        job.main(argv("maint-bad", "--tables", tables), settings=settings, spark=object())  # never reaches Spark
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--tables" in err and "known:" in err and "radar_frames" in err
    if "nosuch" in tables:
        assert "unknown table(s) nosuch" in err


# --- on Delta ------------------------------------------------------------------------------------------

def bronze_rows(n_appends=5, per_append=3):
    """Rows for radar_frames, appended one small file at a time, on two ingest dates."""
    out = []
    for i in range(n_appends):
        when = dt.datetime(2026, 11, 20 + i % 2, 6, 0, tzinfo=UTC)
        out.append([(f"b{i}-{j}", "radar", f"f{i}.jsonl", j, f'{{"frame": {i}, "n": {j}}}', when, when.date(),
                     f"ingest-{i}", i, "1.0", None) for j in range(per_append)])
    return out


def append_each(spark, settings, table, batches):
    """One commit, and one data file, per batch."""
    for batch in batches:
        append_rows(spark, settings, table, batch, one_file=True)


def record_progress(spark, settings, stage, table, version):
    """ops.progress as the stage's run would leave it after consuming ``table`` through ``version``."""
    changefeed.commit_progress(spark, stage, {table: version}, f"{stage}-run", settings)


def table_rows(spark, settings, table, version=None):
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    rows = reader.load(TABLES[table].path(settings)).select("bronze_id", "record_no", "payload", "ingest_date")
    return sorted(tuple(r) for r in rows.collect())


def test_compaction_keeps_rows_and_vacuum_waits_for_the_consumer(spark, settings):
    ensure_tables(spark, settings)
    batches = bronze_rows()
    append_each(spark, settings, "radar_frames", batches)
    table_dir = Path(TABLES["radar_frames"].path(settings))
    before_files = data_files(table_dir)
    assert len(before_files) == 5  # one file per append
    expected = sorted((r[0], r[3], r[4], r[6]) for batch in batches for r in batch)
    version_before = changefeed.table_version(spark, "radar_frames", settings)

    metrics = job.main(argv("maint-1", "--tables", "radar_frames"), settings=settings, spark=spark)
    t = metrics["tables"]["radar_frames"]
    assert list(metrics["tables"]) == ["radar_frames"]
    # two partitions (ingest dates): five small files become one per partition, rows unchanged
    assert (t["files_before"], t["files_after"], t["files_removed"], t["files_added"]) == (5, 2, 5, 2)
    assert table_rows(spark, settings, "radar_frames") == expected
    assert metrics["files_compacted"] == 5
    # normalize has never consumed radar_frames: it will read from version 0, so nothing is vacuumed
    assert "normalize has not consumed radar_frames" in t["vacuum_skipped"]
    assert metrics["vacuum_skipped"] == {"radar_frames": t["vacuum_skipped"]}
    assert "records_in" not in metrics  # not a record-flow stage: no conservation check
    assert data_files(table_dir) >= before_files  # OPTIMIZE only tombstones

    # once normalize has consumed everything, VACUUM runs with the configured retention: the files
    # OPTIMIZE just replaced are younger than 168 h and stay, so time travel still works
    record_progress(spark, settings, "normalize", "radar_frames",
                    changefeed.table_version(spark, "radar_frames", settings))
    listing = spark.conf.get(job.LISTING_PARALLELISM)
    metrics = job.main(argv("maint-2", "--tables", "radar_frames"), settings=settings, spark=spark)
    assert spark.conf.get(job.LISTING_PARALLELISM) == listing  # lowered for VACUUM only
    t = metrics["tables"]["radar_frames"]
    assert (t["retention_h"], t["retention_widened"], t["files_vacuumed"]) == (168, False, 0)
    assert "vacuum_skipped" not in t and metrics["retention_widened"] == {}
    assert (t["files_before"], t["files_after"]) == (2, 2)  # nothing left to compact
    assert data_files(table_dir) >= before_files
    assert table_rows(spark, settings, "radar_frames", version=version_before) == expected


def test_plan_widens_retention_for_a_lagging_consumer(spark, settings):
    ensure_tables(spark, settings, ["progress", "radar_frames"])
    append_each(spark, settings, "radar_frames", bronze_rows(n_appends=3, per_append=1))  # versions 1, 2, 3
    record_progress(spark, settings, "normalize", "radar_frames", 1)  # next read: version 2
    # without in-commit timestamps Delta dates a commit by its log file's modification time
    log_file = Path(TABLES["radar_frames"].path(settings)) / "_delta_log" / f"{2:020d}.json"
    committed = dt.datetime.fromtimestamp(os.path.getmtime(log_file), UTC)

    # 299.5 h after version 2 was committed: 299.5 h + 1 h margin = 300.5 h -> 301 h
    plan = job.plan_vacuum(spark, settings, "radar_frames", committed + dt.timedelta(hours=299.5))
    assert (plan.retention_h, plan.widened, plan.configured_h) == (301, True, 168)
    assert (plan.guard.lagging_stage, plan.guard.needed_version) == ("normalize", 2)

    # an hour after the commit the configured retention covers it
    plan = job.plan_vacuum(spark, settings, "radar_frames", committed + H)
    assert (plan.retention_h, plan.widened) == (168, False)


def test_dry_run_changes_nothing(spark, settings):
    ensure_tables(spark, settings)
    spec = TABLES["quarantine"]
    now = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
    batches = [[(f"q{i}", "ingest", "unreadable", "radar", f"f{i}", i, None, None, b"?", now, f"ingest-{i}")]
               for i in range(4)]
    append_each(spark, settings, "quarantine", batches)
    table_dir = Path(spec.path(settings))
    files, version = data_files(table_dir), changefeed.table_version(spark, "quarantine", settings)

    metrics = job.main(argv("maint-dry", "--tables", "quarantine", "--dry-run"), settings=settings, spark=spark)
    t = metrics["tables"]["quarantine"]
    assert metrics["dry_run"] is True
    assert (t["files_before"], t["compaction_candidates"]) == (4, 4)
    assert "files_after" not in t and "files_removed" not in t
    assert (t["retention_h"], t["files_vacuumed"]) == (168, 0)  # quarantine has no change-feed consumer
    assert changefeed.table_version(spark, "quarantine", settings) == version
    assert data_files(table_dir) == files
    rows = spec.read(spark, settings).select("quarantine_id").collect()
    assert sorted(r[0] for r in rows) == ["q0", "q1", "q2", "q3"]


def test_landed_files_go_once_ingested_and_old_and_logs_by_age(spark, settings, tmp_path):
    """Only the landed file the ledger holds as done, with its present size and time, and older than the
    retention goes; a planned one, a young one and one the ledger does not know stay."""
    ensure_tables(spark, settings)
    old = (dt.datetime.now(UTC) - dt.timedelta(hours=settings.landing_retention_h + 5)).timestamp()
    landing, logs = Path(settings.landing), tmp_path / "task-logs"
    rows = []
    for name, age_s, status in (("done_old", old, "done"), ("planned_old", old, "planned"),
                                ("done_young", None, "done"), ("unknown_old", old, None)):
        path = landing / "radar" / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n")
        if age_s is not None:
            os.utime(path, (age_s, age_s))
        st = path.stat()
        if status:
            rows.append((f"radar/{name}.jsonl", "0" * 64, st.st_size, "radar", 1, 0, dt.datetime.now(UTC), "r", 1,
                         status, st.st_mtime_ns // 1000))
    append_rows(spark, settings, "ingested_files", rows)
    log_file = logs / "dag_id=x" / "attempt=1.log"
    log_file.parent.mkdir(parents=True)
    log_file.write_text("old log\n")
    os.utime(log_file, (old - 200 * 3600, old - 200 * 3600))
    metrics = job.main(argv("maint-prune", "--tables", "ingested_files", "--logs", str(logs)), settings=settings,
                       spark=spark)
    assert metrics["files_pruned"]["landing"] == 1 and metrics["files_pruned"]["logs"] == 1
    assert sorted(p.name for p in (landing / "radar").iterdir()) == ["done_young.jsonl", "planned_old.jsonl",
                                                                      "unknown_old.jsonl"]
    assert not log_file.exists()
