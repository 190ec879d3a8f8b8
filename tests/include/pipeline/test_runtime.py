
import pytest

from sda.lake.tables import TABLES
from sda.pipeline import arguments, changefeed, logcontext, run_metrics, runtime, sinks


def test_conservation_equation():
    assert run_metrics.conservation_holds({"records_in": 10, "records_out": 6, "quarantined": 2, "duplicates": 1,
                                           "late": 1})
    assert run_metrics.conservation_holds({"records_in": 10, "records_out": 6, "quarantined": 2, "duplicates": 2})
    assert run_metrics.conservation_holds({"records_in": 10, "records_out": 6, "quarantined": 2,
                                           "duplicates": 1}) is False
    assert run_metrics.conservation_holds({"events": 3}) is None


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--start", "2026-11-21T06:00:00Z", "--end", "2026-11-21T05:00:00Z", "--run-id", "r"], "is not after --start"),
        (["--start", "yesterday", "--end", "2026-11-21T05:00:00Z", "--run-id", "r"], "expected an ISO-8601 time"),
        (["--start", "2026-11-21T05:00:00Z", "--end", "2026-11-21T06:00:00Z", "--run-id", "r; DROP TABLE x"],
         "--run-id"),
    ],
)
def test_bad_job_arguments_are_refused_with_a_message(argv, message, capsys):
    parser = arguments.stage_parser("demo", "demo")
    with pytest.raises(SystemExit) as exit_:
        runtime.run_stage("demo", argv, lambda *a: {}, parser, spark=object())
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def _body(counts):
    return lambda spark, settings, args: dict(counts)


def test_run_metrics_are_recorded_and_a_broken_equation_fails_loudly(spark, settings):
    argv = ["--start", "2026-11-21T05:00:00Z", "--end", "2026-11-21T05:15:00Z", "--run-id", "run-1"]
    good = {"records_in": 5, "records_out": 3, "quarantined": 1, "duplicates": 1}
    runtime.run_stage("demo", argv, _body(good), arguments.stage_parser("demo", "d"), settings=settings, spark=spark)
    runtime.run_stage("demo", argv, _body(good), arguments.stage_parser("demo", "d"), settings=settings,
                      spark=spark)  # a retry
    bad = {"records_in": 5, "records_out": 3, "quarantined": 0, "duplicates": 1}
    argv_bad = argv[:-1] + ["run-2"]
    with pytest.raises(run_metrics.ConservationError, match=r"records in \(5\) != out \(3\) \+ quarantined \(0\)"):
        runtime.run_stage("demo", argv_bad, _body(bad), arguments.stage_parser("demo", "d"), settings=settings,
                          spark=spark)
    collected = TABLES["run_metrics"].read(spark, settings).collect()
    rows = {r["run_id"]: r for r in collected}
    assert sorted(r["run_id"] for r in collected) == ["run-1", "run-2"]  # the retry replaced its row
    assert (rows["run-1"]["records_in"], rows["run-1"]["conserved"], rows["run-1"]["late"]) == (5, True, None)
    assert rows["run-2"]["conserved"] is False


def test_run_metrics_record_watermark_and_upstream_lag(spark, settings):
    """A stage that consumed ``progress`` up to version v, with two commits to it since, starts 2
    versions behind, and the lag's age is that of the older of the two; its watermark lands as a
    timestamp; a replay reports no lag."""
    import datetime as dt
    import time

    from sda.lake.tables import ensure_tables

    ensure_tables(spark, settings)
    # the stage's cursor on the run_metrics table, then two commits it has not consumed
    changefeed.commit_progress(spark, "demo", {"run_metrics": changefeed.table_version(spark, "run_metrics", settings)},
                            "earlier", settings)
    before_commits = time.time()
    argv = ["--start", "2026-11-21T05:00:00Z", "--end", "2026-11-21T05:15:00Z", "--run-id"]
    body = _body({"watermark": "2026-11-21T05:10:00Z"})
    for run in ("other-1", "other-2"):
        runtime.run_stage("other", argv + [run], _body({}), arguments.stage_parser("other", "o"), settings=settings,
                          spark=spark)
    time.sleep(1.0)
    started = time.time()
    consumed = changefeed.consumed_versions(spark, settings, "demo")["run_metrics"]
    seen = []  # the log context inside each run (sda.pipeline.logcontext): what its log lines carry

    def logged(spark_, settings_, args):
        seen.append(logcontext.current())
        return body(spark_, settings_, args)
    runtime.run_stage("demo", argv + ["now"], logged, arguments.stage_parser("demo", "d"), settings=settings,
                      spark=spark)
    runtime.run_stage("demo", argv + ["again", "--replay"], logged, arguments.stage_parser("demo", "d"),
                      settings=settings, spark=spark)
    assert seen == [
        {"run_id": "now", "stage": "demo", "batch": f"run_metrics@{consumed + 1}..{consumed + 2}"},  # the 2 behind
        {"run_id": "again", "stage": "demo", "batch": "replay 2026-11-21T05:00:00+00:00..2026-11-21T05:15:00+00:00"}]
    assert logcontext.current() == {}
    rows = {r["run_id"]: r for r in TABLES["run_metrics"].read(spark, settings).where("stage = 'demo'").collect()}
    now = rows["now"]
    assert now["lag_versions"] == 2
    assert 1.0 <= now["lag_seconds"] <= started - before_commits + 1.0
    assert now["watermark"].replace(tzinfo=dt.timezone.utc) == dt.datetime(2026, 11, 21, 5, 10, tzinfo=dt.timezone.utc)
    assert now["mode"] == "incremental"
    assert rows["again"]["mode"] == "replay" and rows["again"]["lag_versions"] is None


def test_progress_log_latest_row_counts_and_maintenance_drops_the_superseded(spark, settings):
    """ops.progress is appended to: the row committed last per (stage, table) is the stage's position,
    whether it moves forward, back (a reset to -1), or is committed twice (a retry)."""
    from sda.lake.tables import ensure_tables

    ensure_tables(spark, settings, ["progress"])
    changefeed.commit_progress(spark, "a", {"t1": 3, "t2": 7}, "r1", settings)
    changefeed.commit_progress(spark, "a", {"t1": 5}, "r2", settings)
    changefeed.commit_progress(spark, "a", {"t1": 5}, "r2", settings)  # the retry of r2
    changefeed.commit_progress(spark, "b", {"t1": 9}, "r1", settings)
    changefeed.commit_progress(spark, "b", {"t1": -1}, "reset", settings)  # moved back: re-read from the start
    assert changefeed.consumed_versions(spark, settings, "a") == {"t1": 5, "t2": 7}
    assert changefeed.consumed_versions(spark, settings, table="t1") == {("a", "t1"): 5, ("b", "t1"): -1}
    assert changefeed.last_consumed(spark, "b", "t1", settings) == -1
    assert changefeed.last_consumed(spark, "c", "t1", settings) == -1  # never ran
    assert TABLES["progress"].read(spark, settings).count() == 6
    # 6 rows, 3 positions: (a,t1) keeps one of its three rows (the last two are both current), (a,t2)
    # its one, (b,t1) the reset
    assert changefeed.compact_progress(spark, settings) == 3
    left = sorted((r["stage"], r["source_table"], r["version"])
                  for r in TABLES["progress"].read(spark, settings).collect())
    assert left == [("a", "t1", 5), ("a", "t2", 7), ("b", "t1", -1)]
    assert changefeed.consumed_versions(spark, settings) == {("a", "t1"): 5, ("a", "t2"): 7, ("b", "t1"): -1}


def test_write_rows_appends_new_keys_and_replaces_existing_ones(spark, settings):
    from sda.lake.tables import ensure_tables

    ensure_tables(spark, settings, ["watermarks"])
    schema = TABLES["watermarks"].schema
    import datetime as dt

    t = dt.datetime(2026, 11, 21, 5, 0)
    row = {"sensor_id": "S1", "sensor_kind": "radar", "ingest_batch": 1, "max_event_time": t,
           "min_event_time": t, "records": 10, "run_id": "r1"}
    as_tuple = lambda **changes: tuple({**row, **changes}[f.name] for f in schema.fields)  # noqa: E731
    last_op = lambda: changefeed.history(spark, "watermarks", settings, limit=1).first()["operation"]  # noqa: E731
    sinks.write_rows(spark, [as_tuple(), as_tuple(sensor_id="S2")], "watermarks", settings)
    assert last_op() == "WRITE"  # new keys: a blind append
    sinks.write_rows(spark, [as_tuple(records=12, run_id="r1-retry")], "watermarks", settings)  # same key
    assert last_op() == "MERGE"  # a key already there: replaced
    sinks.write_rows(spark, [as_tuple(ingest_batch=2, records=1)], "watermarks", settings, replace=False)
    sinks.write_rows(spark, [as_tuple(records=99)], "watermarks", settings, replace=False)  # insert-only: kept
    version = changefeed.table_version(spark, "watermarks", settings)
    sinks.write_rows(spark, [], "watermarks", settings)  # nothing: no commit
    assert changefeed.table_version(spark, "watermarks", settings) == version
    got = sorted((r["sensor_id"], r["ingest_batch"], r["records"], r["run_id"])
                 for r in TABLES["watermarks"].read(spark, settings).collect())
    assert got == [("S1", 1, 12, "r1-retry"), ("S1", 2, 1, "r1"), ("S2", 1, 10, "r1")]


def test_a_merge_of_an_empty_source_is_not_run(spark, settings, monkeypatch):
    from sda.lake.tables import ensure_tables

    ensure_tables(spark, settings, ["late_data", "passes"])
    statements: list[str] = []
    run_sql = spark.sql
    monkeypatch.setattr(spark, "sql", lambda query, *a, **k: statements.append(query) or run_sql(query, *a, **k))
    for table in ("late_data", "passes"):
        empty = spark.createDataFrame([], TABLES[table].schema)
        sinks.merge_new(spark, empty, table, settings)
        sinks.upsert(spark, empty, table, settings)
    # unbounded by its empty source, such a MERGE would have read the whole table to change nothing
    assert not [q for q in statements if q.lstrip().upper().startswith("MERGE")]
