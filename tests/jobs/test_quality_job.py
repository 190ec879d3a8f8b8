"""jobs/quality.py: validates only the rows of this run, records them, and exits non-zero when a
fail-severity check breaks."""

from __future__ import annotations

import math
import re
from urllib.parse import unquote

import pytest

from jobs import quality as job
from sda.lake import schemas
from sda.lake.tables import TABLES, ensure_tables
from sda.pipeline import sinks
from tests.seed import append_rows

ARGS = ["--start", "2026-11-21T06:00:00Z", "--end", "2026-11-21T06:15:00Z", "--layer", "silver"]


def silver_rows(run_id, rows):
    """Silver radar observations of run ``run_id``, one per (obs_id, range_m)."""
    import datetime as dt

    t0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)
    out = []
    for obs_id, range_m in rows:
        row = {f.name: None for f in schemas.OBSERVATION.fields}
        row.update(obs_id=obs_id, sensor_id="EGLIN", sensor_kind="radar", event_time=t0, event_date=t0.date(),
                   ingest_time=t0, ingest_batch=1, range_m=range_m, az_rad=3.0, el_rad=math.radians(20),
                   range_rate_ms=100.0, bronze_id=f"b-{obs_id}", source_file="radar/f", run_id=run_id)
        out.append(tuple(row[f.name] for f in schemas.OBSERVATION.fields))
    return out


def silver(spark, run_id, rows):
    return spark.createDataFrame(silver_rows(run_id, rows), schemas.OBSERVATION)


def test_gate_fails_only_on_this_runs_rows(spark, settings, capsys):
    ensure_tables(spark, settings)
    # an older run's duplicate is not this run's business
    append_rows(spark, settings, "observations", silver_rows("old", [("o1", 1e6), ("o1", 1e6)]))
    sinks.merge_new(spark, silver(spark, "new", [("n1", 1e6), ("n2", -3.0)]), "observations", settings)

    metrics = job.main(ARGS + ["--run-id", "new"], settings=settings, spark=spark)
    assert metrics["gate_passed"]
    assert metrics["tables"]["observations"]["failed"] == {"range_m_positive": "quarantine"}
    assert metrics["tables"]["observations_dedup"] == {"skipped": "no rows from this run"}
    assert TABLES["quarantine"].read(spark, settings).count() == 1

    with pytest.raises(SystemExit) as exc:
        job.main(ARGS + ["--run-id", "old"], settings=settings, spark=spark)
    assert exc.value.code == job.GATE_FAILED_EXIT
    err = capsys.readouterr().err
    assert "quality gate FAILED for layer silver" in err and "obs_id_unique" in err

    dq = TABLES["data_quality"].read(spark, settings)
    assert {r["run_id"] for r in dq.select("run_id").distinct().collect()} == {"new", "old"}
    assert dq.where("run_id = 'old' AND expectation = 'obs_id_unique'").first()["unexpected_count"] == 2

    # the failed run still gets its page: the failing check, and a link to a Data Docs page that exists
    page = settings.lakehouse.parent / "reports" / "runs" / "old" / "index.html"
    text = page.read_text()
    assert "gate FAILED" in text and "obs_id_unique" in text
    links = re.findall(r'href="([^"]+)" class="data-docs"', text)
    assert links and all((page.parent / unquote(link)).resolve().is_file() for link in links)
    assert "old/index.html" in (page.parent.parent / "index.html").read_text()


def test_several_layers_in_one_run(spark, settings):
    ensure_tables(spark, settings)
    sinks.merge_new(spark, silver(spark, "r2", [("m1", 1e6)]), "observations", settings)
    metrics = job.main(ARGS[:-1] + ["bronze,silver", "--run-id", "r2"], settings=settings, spark=spark)
    assert metrics["layer"] == "bronze,silver" and metrics["gate_passed"]
    assert metrics["tables"]["radar_frames"] == {"skipped": "no rows from this run"}
    assert metrics["tables"]["observations"]["checks"] > 0


def test_bad_layer_is_an_argument_error(spark, settings):
    with pytest.raises(SystemExit) as exc:
        job.main(["--start", "2026-11-21T06:00:00Z", "--end", "2026-11-21T06:15:00Z", "--run-id", "r",
                  "--layer", "silver,platinum"], settings=settings, spark=spark)
    assert exc.value.code == 2
