"""bench/accuracy_sensors.py: the sensor calibration scored against hand-made truths (drifting biases evaluated by
hand at the window's middle) and the 30 % / one-noise-sigma target."""

from __future__ import annotations

import math

import pytest
from accuracy_sensors import drifting, meets, score_sensor_calibrations

H6 = 6 * 3600.0
# a period of 24 h and phase 0: at t = 3 h (the middle of window [0, 6 h)) sin(pi / 4) = 0.7071
TRUTH = {"sensors": {"EGLIN": {"biases": {"range_m": {"offset": 10.0, "amplitude": 4.0, "period_s": 86400.0,
                                                      "phase": 0.0},
                                          "az_deg": {"offset": 0.001, "amplitude": 0.0, "period_s": 86400.0,
                                                     "phase": 0.0},
                                          "time_ms": {"offset": -2.0, "amplitude": 0.0, "period_s": 86400.0,
                                                      "phase": 0.0}}}}}
REGISTRY = {"EGLIN": {"sigma_range_m": 30.0, "sigma_angle_deg": 0.0154}}


def _row(quantity: str, bias: float, start: float = 0.0) -> dict:
    return {"sensor_id": "EGLIN", "quantity": quantity, "bias": bias, "sigma": 0.5, "n_obs": 100, "n_objects": 5,
            "window_start_unix": start, "window_end_unix": start + H6}


def test_drifting_at_a_time():
    assert drifting(TRUTH["sensors"]["EGLIN"]["biases"]["range_m"], 3 * 3600.0) == pytest.approx(
        10.0 + 4.0 * math.sqrt(0.5))


def test_the_target():
    assert meets(12.0, 10.0, 1.0) and not meets(14.0, 10.0, 1.0)  # 30 % of 10 is 3
    assert meets(0.5, -0.4, 1.0) and not meets(1.5, -0.4, 1.0)  # |true| under one noise sigma: within it
    assert meets(-2.5, -2.0, None) and not meets(0.0, -2.0, None)


def test_scores_each_sensors_newest_window():
    # range: true 12.83 at 3 h; the older window's estimate (far off) is not scored
    rows = [_row("range_m", 0.0, -H6), _row("range_m", 14.0), _row("az_deg", 0.0), _row("time_ms", -1.2)]
    scored = score_sensor_calibrations(rows, TRUTH, REGISTRY)
    assert set(scored["rows"]) == {"EGLIN/range_m", "EGLIN/az_deg", "EGLIN/time_ms"}
    r = scored["rows"]["EGLIN/range_m"]
    assert r["true"] == pytest.approx(12.828, abs=1e-3) and r["meets"] and r["noise_sigma"] == 30.0
    # az: true 0.001 deg under its noise 0.0154 deg: 0 is within one noise sigma
    assert scored["rows"]["EGLIN/az_deg"]["meets"]
    # time: true -2 ms over the 1 ms that stands for its noise: -1.2 is 40 % off
    assert not scored["rows"]["EGLIN/time_ms"]["meets"]
    assert (scored["count"], scored["meets"]) == (3, 2)


def test_nothing_to_score():
    assert score_sensor_calibrations([], None, {})["share_meets"] is None


def test_scored_against_doing_nothing():
    """Per row by hand: range true 12.83, estimated 14 (sigma 0.5): error 1.17, ratio 0.091, improves, applied (14 >=
    3 x 0.5), z 2.34; az true 0.001, estimated 0: error 0.001 = the whole bias, ratio 1, no improvement, not applied
    (0 < 1.5); time true -2, estimated -1.2: error 0.8, ratio 0.4, improves, z 1.6, and at 2.4 sigmas not applied,
    so the fits keep the whole -2."""
    rows = [_row("range_m", 14.0), _row("az_deg", 0.0), _row("time_ms", -1.2)]
    scored = score_sensor_calibrations(rows, TRUTH, REGISTRY)
    r, az, tm = (scored["rows"][f"EGLIN/{q}"] for q in ("range_m", "az_deg", "time_ms"))
    assert r["ratio"] == pytest.approx(1.172 / 12.828, abs=1e-3) and r["improves"] and r["applied"]
    assert r["z"] == pytest.approx(2.343, abs=1e-3) and r["applied_error"] == pytest.approx(1.172, abs=1e-3)
    assert az["ratio"] == pytest.approx(1.0) and not az["improves"] and not az["applied"]
    assert tm["ratio"] == pytest.approx(0.4) and tm["improves"] and not tm["applied"] and tm["applied_error"] == -2.0
    # estimating zero: range and az are within their noise sigmas (30 m, 0.0154 deg): both meet; time's 0 is 2 ms off
    assert scored["nothing_meets"] == 2
    assert scored["share_improves"] == pytest.approx(2 / 3) and scored["ratio_median"] == pytest.approx(0.4)
    assert (scored["applied"], scored["applied_worse"]) == (1, 0)
    assert scored["z_median"] == pytest.approx(1.6) and scored["z_share_within_2"] == pytest.approx(2 / 3)
    assert scored["by_quantity"]["az_deg"] == {"rows": 1, "improves": 0, "ratio_median": 1.0, "applied": 0,
                                               "applied_worse": 0}
