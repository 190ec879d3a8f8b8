"""Association accuracy on the simulator's default scenario, scored against its truth file.

The default scenario is what ``make run`` (scripts/run.sh) simulates:
30 minutes of the embedded sensor registry (6 radars, 3 GEODSS telescopes, 3 ISL relays) over the
generated catalogue (300 objects, seed 1) plus the injected conjunction pair (TCA after the
window), with the default disorder rates. The catalogue the correlator uses is the file the
simulator wrote (newest element set per object, as gold ``catalog`` gives it).

What reaches correlation is emulated from the landed files and the truth labels, as upstream does
it: ingest refuses malformed lines (:func:`sda.transforms.wire.file_records`), normalize refuses unknown
sensors and impossible values and converts to SI, dedup collapses re-deliveries and folds a
re-processed copy with its original, keeping the earliest event time (so ~1 % of the observations
carry a time tag up to 50 ms off their measurement). The association is
:func:`sda.orbit.correlation.correlate_frame` per event-time bucket, exactly what jobs/correlate.py runs in
each ``applyInPandas`` group (a decision depends only on the observation and the catalogue, not on
the rest of its bucket).

Scoring: *correct* = associated with the true object; *wrong* = associated with another object
(or with any object when the truth is "no catalogued object"); everything else is uncorrelated.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from sda.config.settings import Settings
from sda.orbit import correlation
from sda.orbit.catalog import latest_by_object, load_catalog
from sda.orbit.screening import satrecs_from_lines
from sda.orbit.sensors import load_sensors, sensor_sigmas
from sda.sim import scoring
from sda.sim.simulate import SimConfig, simulate

UTC = dt.timezone.utc
START = dt.datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
MIN_CORRECT = 0.99
MAX_WRONG = 0.001




@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    return _scenario(tmp_path_factory.mktemp("accuracy"))


def _scenario(root, truth: str = "numerical"):
    defaults = SimConfig(start=START, end=START)
    cfg = SimConfig(start=START, end=START + dt.timedelta(minutes=30), landing=root / "landing",
                    catalog_out=root / "catalog.tle", inject_conjunction=True,
                    tca=START + dt.timedelta(hours=3, minutes=30), truth=truth,
                    sky="kind")  # the registry's noise, no biases: the oracle of the residual figures
    assert (cfg.objects, cfg.seed, cfg.dup_rate, cfg.reprocess_rate, cfg.late_rate) == (
        defaults.objects, defaults.seed, defaults.dup_rate, defaults.reprocess_rate, defaults.late_rate)
    result = simulate(cfg)
    sensors = load_sensors()
    # what reaches correlation: ingest, normalize and dedup emulated from the files and the truth labels
    obs = scoring.landed_observations(result, sensors)

    entries = latest_by_object(load_catalog(result.catalog_file)[0])
    ids = [e.norad_id for e in entries]
    sats = satrecs_from_lines([e.line1 for e in entries], [e.line2 for e in entries])
    gate_km = Settings().correlation_gate_km
    sigmas = sensor_sigmas(sensors)
    bucket = obs["event_time"].astype("int64") // (correlation.BUCKET_S * 10**9)
    found = pd.concat([correlation.correlate_frame(group.reset_index(drop=True), ids, sats, gate_km, sigmas,
                                                                light_time=True)
                       for _, group in obs.groupby(bucket)])
    return obs.merge(found, on="obs_id", validate="one_to_one"), result


def test_default_scenario_is_representative(scenario):
    scored, result = scenario
    assert set(scored["sensor_kind"]) == {"radar", "optical", "isl"}
    assert scored.groupby("sensor_kind").size().min() > 300
    assert {"none", "late", "reprocessed"} <= set(scored["disorder"])
    assert result.injected is not None


def test_association_accuracy_against_truth(scenario):
    scored, _ = scenario
    n = len(scored)
    associated = (scored["status"] == "correlated").to_numpy()
    same = (scored["norad_id"] == scored["true_id"]).fillna(False).to_numpy(dtype=bool)
    no_object = scored["true_id"].isna().to_numpy()
    correct = (associated & same) | (~associated & no_object)
    wrong = associated & ~same
    uncorrelated = ~associated & ~no_object
    figures = (f"{n} observations: correct {correct.sum()} ({correct.mean():.3%}), wrong {wrong.sum()} "
               f"({wrong.mean():.3%}), uncorrelated {uncorrelated.sum()} ({uncorrelated.mean():.3%}); "
               f"ambiguous {int(scored['ambiguous'].sum())}")
    per_kind = "; ".join(
        f"{kind}: {int(correct[idx].sum())}/{len(idx)} correct, {int(wrong[idx].sum())} wrong"
        for kind, idx in scored.groupby("sensor_kind").indices.items())
    print(f"\ncorrelation accuracy, default scenario: {figures}\n  {per_kind}")
    assert correct.mean() >= MIN_CORRECT and wrong.mean() < MAX_WRONG, f"{figures}\n{per_kind}"


@pytest.fixture(scope="module")
def exact_scenario(tmp_path_factory):
    """The default scenario observed on the element sets' own SGP4 trajectories (``truth="sgp4"``): the
    catalogue's prediction is then exact, so what is left in a residual is the sensor's noise alone."""
    return _scenario(tmp_path_factory.mktemp("exact"), truth="sgp4")


def test_residuals_match_the_sensor_noise(exact_scenario):
    """The signed residuals of the correct associations are the simulator's noise: zero mean, the
    registry's sigma (the prediction is exact here, so it adds nothing)."""
    scored, _ = exact_scenario
    ok = scored[(scored["status"] == "correlated") & (scored["norad_id"] == scored["true_id"])
                & (scored["disorder"] != "reprocessed")]
    radar = ok[ok["sensor_kind"] == "radar"]
    sigma_range = radar["sensor_id"].map({s: v.sigma_range_m for s, v in load_sensors().items()})
    assert (radar["residual_range_m"] / sigma_range).std() == pytest.approx(1.0, abs=0.05)
    assert radar["residual_az_rad"].std() == pytest.approx(np.deg2rad(0.015), rel=0.1)
    assert radar["residual_range_rate_ms"].std() == pytest.approx(2.0, rel=0.05)
    optical = ok[ok["sensor_kind"] == "optical"]
    assert optical["residual_dec_rad"].std() == pytest.approx(np.deg2rad(0.00028), rel=0.1)
    isl = ok[ok["sensor_kind"] == "isl"]
    isl_residuals = isl[["residual_radial_m", "residual_along_m", "residual_cross_m"]].stack()
    assert isl_residuals.std() == pytest.approx(50.0, rel=0.1)
    for column in correlation.RESIDUAL_COLUMNS:
        values = ok[column].dropna()
        assert abs(values.mean()) < 4 * values.std() / np.sqrt(len(values)) + 1e-12, column
