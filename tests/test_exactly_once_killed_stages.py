"""Exactly-once under failure: each stage is killed at a point of its write sequence -- before it
writes, between two of its writes, after its writes but before its progress is recorded -- and rerun
as an Airflow retry would (same arguments, same run id); the tables then equal those of the shared
uninterrupted run (:mod:`tests.exactly_once_support`): a lost row or a doubled one shows up."""

from __future__ import annotations

import pytest

from sda.pipeline import faults
from tests import chain
from tests.exactly_once_support import SCREEN, lakehouse, load_catalog

# the fixtures scenario, staging and reference: tests/exactly_once_support.py, a plugin of tests/conftest.py
pytestmark = pytest.mark.slow

# where each stage is killed, in the order its attempts die: before it writes anything, between two
# of its writes, and after its writes but before it commits its progress
KILL_POINTS = {
    "ingest": ("ingest:before-write", "ingest:after-radar", "ingest:after-quarantine"),
    "normalize": ("normalize:before-write", "normalize:after-silver", "normalize:before-progress"),
    "dedup": ("dedup:before-write", "dedup:after-late", "dedup:before-progress"),
    "correlate": ("correlate:before-write", "correlate:after-correlated", "correlate:before-progress"),
    "fuse": ("fuse:before-write", "fuse:after-orbits", "fuse:before-progress"),
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
            monkeypatch.setattr(faults, "KILL_AT", {point})
            with pytest.raises(faults.SimulatedCrash, match=point):
                chain.run_stage(spark, settings, stage, "run-1")
        monkeypatch.setattr(faults, "KILL_AT", set())
        chain.run_stage(spark, settings, stage, "run-1")
    chain.run_stage(spark, settings, "conjunction", "run-1", SCREEN)
    assert chain.differences(chain.snapshot(spark, settings), reference[1]) == []
    again = chain.run_flow(spark, settings, "run-2")
    assert [again[s]["records_in"] for s in chain.FLOW] == [0] * len(chain.FLOW)
