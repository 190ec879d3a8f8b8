"""Determinism and exactly-once under failure, on simulated sensor files through the real stage jobs.

* Determinism: the same files, landed in a different order and split across a different number of
  runs, give the same silver and gold rows (lineage and run metadata aside).
* Exactly-once: each stage is killed at a point of its write sequence -- before it writes, between two
  of its writes, after its writes but before its progress is recorded -- and rerun as an Airflow
  retry would (same arguments, same run id); the tables then equal those of an uninterrupted run.
  One case kills a real process with exit status 137 (``SDA_KILL_AT``), no Python clean-up at all.

The reference for every comparison is another run of the pipeline that was not interrupted, on the
same files: a lost row or a doubled one shows up as a difference.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sda import runtime
from sda.settings import load_settings
from sda.tables import TABLES
from tests import chain
from tests.conftest import CONNECT_PORT

pytestmark = pytest.mark.slow
PROJECT_ROOT = Path(__file__).resolve().parents[1]
SIM_START = dt.datetime(2026, 11, 20, 10, 0, tzinfo=chain.UTC)
SCREEN = ["--screen-start", "2026-11-20T10:00:00Z", "--horizon-h", "3"]


@pytest.fixture(scope="module")
def staging(tmp_path_factory):
    """One simulated scenario (with every kind of disorder and an injected conjunction), made once."""
    from sda.simulate import SimConfig, simulate

    root = tmp_path_factory.mktemp("staging")
    result = simulate(SimConfig(start=SIM_START, end=SIM_START + dt.timedelta(minutes=10), landing=root / "landing",
                                catalog_out=root / "catalog.tle", objects=150, seed=7, inject_conjunction=True,
                                tca=SIM_START + dt.timedelta(hours=1)))
    return root, sorted(result.files)


def lakehouse(tmp_path: Path, name: str, catalog: Path):
    base = tmp_path / name
    return load_settings(env={}, lakehouse=base / "lakehouse", landing=base / "landing", outbox=base / "outbox",
                         catalog_file=catalog, shuffle_partitions=2, connect_port=CONNECT_PORT)


def load_catalog(spark, settings, run_id="catalog-1"):
    chain.run_stage(spark, settings, "catalog", run_id, ["--file", str(settings.catalog_file)])


@pytest.fixture(scope="module")
def reference(spark, staging, tmp_path_factory):
    """All files landed at once, one run of every stage: the uninterrupted result."""
    root, files = staging
    settings = lakehouse(tmp_path_factory.mktemp("reference"), "ref", root / "catalog.tle")
    load_catalog(spark, settings)
    chain.land(files, root / "landing", settings.landing)
    chain.run_flow(spark, settings, "run-1")
    chain.run_stage(spark, settings, "conjunction", "run-1", SCREEN)
    return settings, chain.snapshot(spark, settings)


def test_reference_run_is_non_trivial(reference):
    _, snap = reference
    assert len(snap["observations"]) > 1000 and len(snap["correlated"]) > 1000
    assert snap["quarantine"] and snap["passes"] and snap["object_state"] and snap["alerts"]


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
    chain.run_stage(spark, settings, "conjunction", "run-x", SCREEN)
    assert chain.differences(chain.snapshot(spark, settings), reference[1]) == []


# where each stage is killed, in the order its attempts die: before it writes anything, between two
# of its writes, and after its writes but before it commits its progress
KILL_POINTS = {
    "ingest": ("ingest:before-write", "ingest:after-radar", "ingest:after-quarantine"),
    "normalize": ("normalize:before-write", "normalize:after-silver", "normalize:before-progress"),
    "dedup": ("dedup:before-write", "dedup:after-late", "dedup:before-progress"),
    "correlate": ("correlate:before-write", "correlate:after-correlated", "correlate:before-progress"),
}


def test_killed_stages_retried_equal_an_uninterrupted_run(spark, staging, reference, tmp_path, monkeypatch):
    """Every stage's attempt dies three times -- before writing, mid-write, after writing but before
    its progress commit -- each attempt starting from what the one before left behind, then the
    Airflow retry (same arguments, same run id) finishes. The tables equal the uninterrupted run's,
    and a later run finds nothing left to do."""
    root, files = staging
    settings = lakehouse(tmp_path, "killed-stages", root / "catalog.tle")
    load_catalog(spark, settings)
    chain.land(files, root / "landing", settings.landing)
    for stage in chain.FLOW:
        for point in KILL_POINTS[stage]:
            monkeypatch.setattr(runtime, "KILL_AT", {point})
            with pytest.raises(runtime.SimulatedCrash, match=point):
                chain.run_stage(spark, settings, stage, "run-1")
        monkeypatch.setattr(runtime, "KILL_AT", set())
        chain.run_stage(spark, settings, stage, "run-1")
    chain.run_stage(spark, settings, "conjunction", "run-1", SCREEN)
    assert chain.differences(chain.snapshot(spark, settings), reference[1]) == []
    again = chain.run_flow(spark, settings, "run-2")
    assert [again[s]["records_in"] for s in chain.FLOW] == [0, 0, 0, 0]


def test_process_killed_mid_write_then_retried(spark, staging, reference, tmp_path):
    """kill -9 semantics: the job process dies between its silver and quarantine writes."""
    root, files = staging
    settings = lakehouse(tmp_path, "killed", root / "catalog.tle")
    load_catalog(spark, settings)
    chain.land(files, root / "landing", settings.landing)
    chain.run_stage(spark, settings, "ingest", "run-1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SDA_")}
    env.update(settings.as_env(), SDA_KILL_AT="normalize:after-silver", PYTHONPATH=str(PROJECT_ROOT))
    argv = ["--start", chain.iso(chain.START), "--end", chain.iso(chain.FAR_END), "--run-id", "run-1"]
    code = "import sys; from jobs import normalize; normalize.main(sys.argv[1:])"
    proc = subprocess.run([sys.executable, "-c", code, *argv], env=env, cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 137, proc.stderr[-3000:]
    assert "killing the process at normalize:after-silver" in proc.stderr
    for stage in ("normalize", "dedup", "correlate"):
        chain.run_stage(spark, settings, stage, "run-1")
    chain.run_stage(spark, settings, "conjunction", "run-1", SCREEN)
    assert chain.differences(chain.snapshot(spark, settings), reference[1]) == []


def test_server_killed_mid_stage_then_restarted_and_retried(staging, reference, tmp_path, monkeypatch):
    """kill -9 of the Spark Connect server's JVM in the middle of a stage (between normalize's silver
    and quarantine writes): the stage fails at once with an error naming the server's address, the
    server is started again, the Airflow retry converges, and the tables equal an uninterrupted run's.
    A server of its own, so the suite's shared one stays up."""
    import signal
    import time

    from sda import server
    from sda.spark import SparkServerUnavailable, connect
    from tests.conftest import _free_port

    root, files = staging
    settings = lakehouse(tmp_path, "server-killed", root / "catalog.tle")
    own = load_settings(env={}, lakehouse=settings.lakehouse, landing=settings.landing, outbox=settings.outbox,
                        catalog_file=settings.catalog_file, shuffle_partitions=2, connect_port=_free_port())
    server.start(own, warm=False)
    try:
        spark = connect(own)
        load_catalog(spark, own)
        chain.land(files, root / "landing", own.landing)
        chain.run_stage(spark, own, "ingest", "run-1")
        pid = server.read_pid(own)
        real_checkpoint = runtime.checkpoint

        def kill_server_at(name):
            if name == "normalize:after-silver":
                os.kill(pid, signal.SIGKILL)  # the JVM itself, as kill -9 would
            real_checkpoint(name)

        monkeypatch.setattr(runtime, "checkpoint", kill_server_at)
        began = time.monotonic()
        with pytest.raises(SparkServerUnavailable) as failure:
            chain.run_stage(spark, own, "normalize", "run-1")
        assert own.connect_url in str(failure.value) and "normalize" in str(failure.value)
        assert time.monotonic() - began < 120  # no hang: the client gives up within seconds of retries
        monkeypatch.setattr(runtime, "checkpoint", real_checkpoint)
        # a client whose server is not running gets the same clear error, before any work
        with pytest.raises(SparkServerUnavailable, match=own.connect_url.replace(".", r"\.")):
            connect(own)
        server.start(own, warm=False)
        spark = connect(own)
        for stage in ("normalize", "dedup", "correlate"):  # the retry, then the rest of the run
            chain.run_stage(spark, own, stage, "run-1")
        chain.run_stage(spark, own, "conjunction", "run-1", SCREEN)
        assert chain.differences(chain.snapshot(spark, own), reference[1]) == []
    finally:
        server.stop(own)


# --- replay (sda.replay): recompute a range from the tables upstream ---------------------------------

def copy_of(settings, tmp_path: Path, name: str):
    """An independent copy of a lakehouse (Delta tables hold relative paths: a copied tree is a table)."""
    import shutil

    base = settings.lakehouse.parent
    shutil.copytree(base, tmp_path / name)
    return lakehouse(tmp_path, name, settings.catalog_file)


def replay(spark, settings, stage: str, start: dt.datetime, end: dt.datetime, extra=()):
    argv = ["--start", chain.iso(start), "--end", chain.iso(end), "--run-id", f"replay-{stage}", "--replay", *extra]
    return chain.job(stage).main(argv, settings=settings, spark=spark)


def progress_of(spark, settings):
    """The consumed versions and the progress log's length (a commit appends rows)."""
    return runtime.consumed_versions(spark, settings), TABLES["progress"].read(spark, settings).count()


def test_replay_with_unchanged_inputs_equals_the_original(spark, reference, tmp_path):
    settings = copy_of(reference[0], tmp_path, "replayed")
    before = progress_of(spark, settings)
    lo, hi = SIM_START - dt.timedelta(hours=2), SIM_START + dt.timedelta(hours=2)
    figures = {stage: replay(spark, settings, stage, lo, hi) for stage in ("normalize", "dedup", "correlate")}
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
    for layer, table in (("silver", "observations"), ("silver", "observations_dedup"), ("gold", "correlated"), ("gold", "uncorrelated")):
        path = settings.lakehouse / layer / table
        lost += spark.read.format("delta").load(str(path)).where(cond).count()
        spark.sql(f"DELETE FROM delta.`{path}` WHERE {cond}").collect()
    assert lost > 300
    assert chain.differences(chain.snapshot(spark, settings), reference[1]) != []  # the loss shows
    for stage in ("normalize", "dedup", "correlate"):
        replay(spark, settings, stage, lo, hi)
    assert chain.differences(chain.snapshot(spark, settings), reference[1]) == []


# --- lineage (sda trace) -------------------------------------------------------------------------

def test_trace_leads_from_an_alert_to_its_landing_records(spark, reference, staging):
    """Every bronze record the trace names is, by the simulator's truth file, an observation of one of
    the alert's two objects, found at its line of a landing file whose sha256 is the one recorded;
    and every clean truth record of the pair is among the traced observations."""
    import hashlib
    import json

    from sda import lineage

    settings, _ = reference
    root, _ = staging
    alerts = spark.read.format("delta").load(str(settings.lakehouse / "gold" / "alerts")).collect()
    summary = json.loads(next((root / "landing" / "_truth").glob("*.summary.json")).read_text())
    pair = {int(summary["injected"]["primary"]), int(summary["injected"]["secondary"])}
    alert = next(a for a in alerts if {a["primary_id"], a["secondary_id"]} == pair)
    result = lineage.trace(spark, settings, alert["alert_id"])

    truth = [json.loads(line) for p in (root / "landing" / "_truth").glob("*.jsonl") for line in p.read_text().splitlines() if line]
    by_line = {}
    for t in truth:
        by_line.setdefault((t["file"], t["record_no"]), set()).add(t["norad_id"])
    assert result["bronze"], "no bronze records traced"
    for b in result["bronze"]:
        rel = str(Path(b["source_file"]).relative_to(settings.landing)) if Path(b["source_file"]).is_absolute() else b["source_file"]
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
    from sda import lineage

    with pytest.raises(lineage.TraceError, match="no alert 'nope'"):
        lineage.trace(spark, reference[0], "nope")
