"""sda.sim.scoring.landed_observations: the observations a benchmark takes as reaching correlation, deduplicated
by the truth's labels (the tests' oracle) or by the dedup stage's own rule (what a benchmark of the pipeline takes)."""

from __future__ import annotations

import collections
import datetime as dt

import pytest

from sda.orbit.sensors import load_sensors
from sda.sim import scoring
from sda.sim.simulate import SimConfig, simulate

START = dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def landed(tmp_path_factory):
    root = tmp_path_factory.mktemp("scoring")
    return simulate(SimConfig(start=START, end=START + dt.timedelta(minutes=40), landing=root / "landing",
                              catalog_out=root / "catalog.tle", objects=40, seed=5))


def test_the_pipelines_dedup_folds_what_the_truth_says_is_a_copy(landed):
    """The simulator's re-deliveries and re-processed copies (the truth's ``duplicate_of``) are what dedup's rule
    folds, no more and no less: both ways keep the same records, one per original."""
    sensors = load_sensors()
    by_truth = scoring.landed_observations(landed, sensors, dedup="truth")
    by_pipeline = scoring.landed_observations(landed, sensors, dedup="pipeline")
    assert collections.Counter(by_truth["disorder"])["none"] > 1000
    assert sorted(by_pipeline["key"]) == sorted(by_truth["key"])
    assert not set(by_pipeline["disorder"]) & {"redelivery", "impossible"}
    assert by_pipeline["event_time"].is_monotonic_increasing


def test_an_unknown_dedup_is_refused(landed):
    with pytest.raises(ValueError, match="dedup must be one of"):
        scoring.landed_observations(landed, load_sensors(), dedup="none")
