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
from tests import chain

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
                         catalog_file=catalog, shuffle_partitions=2)


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


KILL_CASES = {
    "before-write": {"ingest": "ingest:before-write", "normalize": "normalize:before-write",
                     "dedup": "dedup:before-write", "correlate": "correlate:before-write"},
    "mid-write": {"ingest": "ingest:after-radar", "normalize": "normalize:after-silver",
                  "dedup": "dedup:after-late", "correlate": "correlate:after-correlated"},
    "after-write-before-progress": {"ingest": "ingest:after-quarantine", "normalize": "normalize:before-progress",
                                    "dedup": "dedup:before-progress", "correlate": "correlate:before-progress"},
}


@pytest.mark.parametrize("case", sorted(KILL_CASES))
def test_killed_stages_retried_equal_an_uninterrupted_run(spark, staging, reference, tmp_path, monkeypatch, case):
    root, files = staging
    settings = lakehouse(tmp_path, case, root / "catalog.tle")
    load_catalog(spark, settings)
    chain.land(files, root / "landing", settings.landing)
    for stage in chain.FLOW:
        point = KILL_CASES[case][stage]
        monkeypatch.setattr(runtime, "KILL_AT", {point})
        with pytest.raises(runtime.SimulatedCrash, match=point):
            chain.run_stage(spark, settings, stage, "run-1")
        monkeypatch.setattr(runtime, "KILL_AT", set())
        chain.run_stage(spark, settings, stage, "run-1")  # the Airflow retry: same arguments, same run id
    chain.run_stage(spark, settings, "conjunction", "run-1", SCREEN)
    assert chain.differences(chain.snapshot(spark, settings), reference[1]) == []
    # and a later run finds nothing left to do
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
