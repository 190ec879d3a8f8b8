"""Determinism on simulated sensor files through the real stage jobs: the same files, landed in a
different order and split across a different number of runs, give the same silver and gold rows
(lineage and run metadata aside); a replay of a range equals the original and puts back what a range
lost; an alert traces back to its landing records. The reference is the shared uninterrupted run
(:mod:`tests.exactly_once_support`)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from tests import chain
from tests.exactly_once_support import SCREEN, SIM_START, copy_of, lakehouse, load_catalog, progress_of, replay

# the fixtures scenario, staging and reference: tests/exactly_once_support.py, a plugin of tests/conftest.py
pytestmark = pytest.mark.slow

def test_reference_run_is_non_trivial(reference):
    _, snap = reference
    assert len(snap["observations"]) > 1000 and len(snap["correlated"]) > 1000
    assert snap["quarantine"] and snap["passes"] and snap["object_state"] and snap["alerts"]


def test_the_screening_timed_each_file_of_its_run_from_landing_to_alert(spark, reference):
    """The conjunction stage's landing-to-alert histogram (sda.pipeline.latency) holds every file the run ingested,
    each between the file's landing (its ledger mtime) and when the screening's figures were recorded."""
    import json

    from sda.lake.tables import TABLES

    settings, _ = reference
    ledger = TABLES["ingested_files"].read(spark, settings).where("run_id = 'run-1' AND status = 'done'").collect()
    [row] = TABLES["run_metrics"].read(spark, settings).where("stage = 'conjunction' AND run_id = 'run-1'").collect()
    got = json.loads(row["metrics_json"])["landing_to_alert"]
    assert got["count"] == len(ledger) > 0
    finished = row["finished"].replace(tzinfo=dt.timezone.utc).timestamp()
    ages = [finished - r["file_mtime_us"] / 1e6 for r in ledger]
    assert got["max"] <= max(ages) + 1e-3  # recorded after the histogram was taken
    assert got["max"] >= max(ages) - row["seconds"]  # and taken during the screening run
    counts = [got["buckets"][b] for b in sorted(got["buckets"], key=float)]
    assert counts == sorted(counts) and counts[-1] <= got["count"]


def test_different_file_order_and_run_split_give_identical_tables(spark, staging, reference, tmp_path):
    root, files = staging
    settings = lakehouse(tmp_path, "shuffled", root / "catalog.tle")
    load_catalog(spark, settings)
    backwards = list(reversed(files))
    drops = [backwards[: len(files) // 5], backwards[len(files) // 5: len(files) // 2], backwards[len(files) // 2:]]
    for i, drop in enumerate(drops):
        chain.land(drop, root / "landing", settings.landing)
        chain.run_stage(spark, settings, "ingest", f"run-{i}")
        chain.run_stage(spark, settings, "normalize", f"run-{i}")
        if i != 1:  # dedup and correlate skip the middle run: they catch up over two batches later
            chain.run_stage(spark, settings, "dedup", f"run-{i}")
            chain.run_stage(spark, settings, "correlate", f"run-{i}")
            chain.run_stage(spark, settings, "fuse", f"run-{i}")
    chain.run_stage(spark, settings, "conjunction", "run-x", SCREEN)
    assert chain.differences(chain.snapshot(spark, settings), reference[1]) == []


# --- replay (sda.pipeline.replay): recompute a range from the tables upstream ---------------------------------

def test_replay_with_unchanged_inputs_equals_the_original(spark, reference, tmp_path):
    settings = copy_of(reference[0], tmp_path, "replayed")
    before = progress_of(spark, settings)
    lo, hi = SIM_START - dt.timedelta(hours=2), SIM_START + dt.timedelta(hours=2)
    figures = {stage: replay(spark, settings, stage, lo, hi) for stage in ("normalize", "dedup", "correlate", "fuse")}
    figures["conjunction"] = replay(spark, settings, "conjunction", lo, hi, SCREEN)
    assert figures["normalize"]["records_in"] > 1000 and figures["correlate"]["records_in"] > 1000
    assert chain.differences(chain.snapshot(spark, settings), reference[1]) == []
    after = progress_of(spark, settings)
    assert after == before  # a replay commits no progress
    # the ingest ledger and the outbox are not touched by a replay
    assert sorted(p.name for p in settings.outbox.rglob("*")) == sorted(p.name for p in reference[0].outbox.rglob("*"))


def test_replay_puts_back_what_a_range_lost(spark, reference, tmp_path):
    """Rows of a 3-minute range deleted from silver and gold come back, equal to the original."""
    settings = copy_of(reference[0], tmp_path, "lossy")
    lo, hi = SIM_START + dt.timedelta(minutes=3), SIM_START + dt.timedelta(minutes=6)
    cond = f"event_time >= '{lo:%Y-%m-%d %H:%M:%S}' AND event_time < '{hi:%Y-%m-%d %H:%M:%S}'"
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    lost = 0
    for layer, table in (("silver", "observations"), ("silver", "observations_dedup"), ("gold", "correlated"),
                         ("gold", "uncorrelated")):
        path = settings.lakehouse / layer / table
        lost += spark.read.format("delta").load(str(path)).where(cond).count()
        spark.sql(f"DELETE FROM delta.`{path}` WHERE {cond}").collect()
    assert lost > 300
    assert chain.differences(chain.snapshot(spark, settings), reference[1]) != []  # the loss shows
    for stage in ("normalize", "dedup", "correlate", "fuse"):
        replay(spark, settings, stage, lo, hi)
    assert chain.differences(chain.snapshot(spark, settings), reference[1]) == []


# --- lineage (sda trace) -------------------------------------------------------------------------

def test_trace_leads_from_an_alert_to_its_landing_records(spark, reference, staging):
    """Every bronze record the trace names is, by the simulator's truth file, an observation of one of
    the alert's two objects, found at its line of a landing file whose sha256 is the one recorded;
    and every clean truth record of the pair is among the traced observations."""
    import hashlib
    import json

    from sda.pipeline import lineage

    settings, _ = reference
    root, _ = staging
    alerts = spark.read.format("delta").load(str(settings.lakehouse / "gold" / "alerts")).collect()
    summary = json.loads(next((root / "landing" / "_truth").glob("*.summary.json")).read_text())
    pair = {int(summary["injected"]["primary"]), int(summary["injected"]["secondary"])}
    alert = next(a for a in alerts if {a["primary_id"], a["secondary_id"]} == pair)
    result = lineage.trace(spark, settings, alert["alert_id"])

    truth = [json.loads(line) for p in (root / "landing" / "_truth").glob("*.jsonl")
             for line in p.read_text().splitlines() if line]
    by_line = {}
    for t in truth:
        by_line.setdefault((t["file"], t["record_no"]), set()).add(t["norad_id"])
    assert result["bronze"], "no bronze records traced"
    for b in result["bronze"]:
        source = Path(b["source_file"])
        rel = str(source.relative_to(settings.landing)) if source.is_absolute() else b["source_file"]
        assert by_line.get((rel, b["record_no"]), set()) & pair, (rel, b["record_no"])
    for f in result["landing_files"]:
        path = Path(f["file_path"]) if Path(f["file_path"]).is_absolute() else settings.landing / f["file_path"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == f["file_sha256"]
    for role in ("primary", "secondary"):
        obj = result["objects"][role]
        norad = obj["norad_id"]
        clean = sum(1 for t in truth if t["norad_id"] == norad and t["disorder"] == "none")
        late = sum(1 for t in truth if t["norad_id"] == norad and t["disorder"] == "late")
        assert clean <= len(obj["observations"]) <= clean + late, (role, clean, late, len(obj["observations"]))
        assert obj["element_set"]["norad_id"] == norad
    text = lineage.render(result)
    assert alert["alert_id"] in text and "landing file" in text


def test_trace_of_an_unknown_alert_says_so(spark, reference):
    from sda.pipeline import lineage

    with pytest.raises(lineage.TraceError, match="no alert 'nope'"):
        lineage.trace(spark, reference[0], "nope")
