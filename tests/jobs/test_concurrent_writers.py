"""Two writers commit to one table at once (a scheduled run beside a backfill or a replay): Delta
refuses the loser's commit, and every sink retries its MERGE (``sinks.with_conflict_retry``), so
both effects land and nothing is lost or doubled.

The race is made deterministic: writer A's source rows pass through a UDF that waits until writer B
has committed, so A's transaction (its snapshot taken before B's commit) always meets B's commit.
Without the retry the same race fails A (the control case), so the test can tell the two apart.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from sda.lake.tables import TABLES, ensure_tables
from sda.pipeline import sinks

SCHEMA = "stage string, source_table string, version long, run_id string"


def _rows(spark, rows, gate: Path | None = None):
    from pyspark.sql import functions as F
    from pyspark.sql.functions import udf

    df = spark.createDataFrame(rows, SCHEMA).withColumn("updated", F.current_timestamp())
    if gate is None:
        return df
    gate_path = str(gate)

    @udf("string")
    def after_gate(run_id):  # runs in the Python worker: waits for writer B's commit (at most 120 s)
        import os
        import time as _time

        deadline = _time.monotonic() + 120
        while not os.path.exists(gate_path) and _time.monotonic() < deadline:
            _time.sleep(0.05)
        return run_id

    return df.withColumn("run_id", after_gate("run_id"))


def _race(spark, settings, tmp_path: Path) -> dict:
    """Writer A (blocked until B commits) and writer B upsert different keys into ops.progress."""
    ensure_tables(spark, settings, ["progress"])
    gate = tmp_path / "b-committed"
    outcome: dict = {}

    def writer_a():
        try:
            rows = _rows(spark, [("correlate", "observations_dedup", 7, "run-a")], gate)
            sinks.upsert(spark, rows, "progress", settings)
            outcome["a"] = "ok"
        except Exception as exc:  # noqa: BLE001 - reported to the test
            outcome["a"] = exc

    a = threading.Thread(target=writer_a)
    a.start()
    time.sleep(3)  # A has started its MERGE and waits in the UDF
    sinks.upsert(spark, _rows(spark, [("dedup", "observations", 4, "run-b")]), "progress", settings)
    gate.touch()
    a.join(timeout=300)
    assert not a.is_alive()
    progress = TABLES["progress"].read(spark, settings).collect()
    outcome["rows"] = sorted((r["stage"], r["version"], r["run_id"]) for r in progress)
    return outcome


def test_a_conflicting_merge_is_retried_and_both_writes_land(spark, settings, tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(sinks, "CONFLICT_BACKOFF_S", 0.5)
    with caplog.at_level(logging.WARNING, logger=sinks.log.name):
        outcome = _race(spark, settings, tmp_path)
    assert outcome["a"] == "ok", outcome["a"]
    assert outcome["rows"] == [("correlate", 7, "run-a"), ("dedup", 4, "run-b")]
    # the race did happen: A's first commit was refused and retried
    assert any("MERGE INTO progress: concurrent modification" in r.getMessage() for r in caplog.records)


def test_without_the_retry_the_same_race_fails_the_loser(spark, settings, tmp_path, monkeypatch):
    monkeypatch.setattr(sinks, "CONFLICT_ATTEMPTS", 1)
    outcome = _race(spark, settings, tmp_path)
    assert isinstance(outcome["a"], Exception) and sinks.is_conflict(outcome["a"]), outcome["a"]
    assert outcome["rows"] == [("dedup", 4, "run-b")]
