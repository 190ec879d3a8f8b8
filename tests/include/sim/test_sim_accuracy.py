"""Scoring against the truth (sda.sim.accuracy), on hand-made cases with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from sda.sim import accuracy
from sda.sim.dynamics import Ephemeris


def test_summary_is_median_and_p90():
    assert accuracy.summary([10, 1, 2, 3, 4, 5, 6, 7, 8, 9, np.nan]) == {"n": 10, "median": 5.5, "p90": 9.1}
    assert accuracy.summary([]) == {"n": 0, "median": None, "p90": None}


def test_position_error_on_the_predicted_orbits_axes_and_its_mahalanobis_distance():
    r_pred = np.array([[7000.0, 0.0, 0.0], [0.0, 7000.0, 0.0]])
    v_pred = np.array([[0.0, 7.5, 0.0], [-7.5, 0.0, 0.0]])
    # 1 m up, 2 m ahead, 3 m against the orbit normal (+z for both); the second 6 m ahead only
    r_true = r_pred + np.array([[0.001, 0.002, -0.003], [-0.006, 0.0, 0.0]])
    errors = accuracy.position_errors(r_true, r_pred, v_pred, np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]))
    assert errors[["radial_m", "along_m", "cross_m"]].to_numpy() == pytest.approx(
        np.array([[1.0, 2.0, -3.0], [0.0, 6.0, 0.0]]), abs=1e-9)
    assert errors["total_m"].tolist() == pytest.approx([np.sqrt(14.0), 6.0])
    assert errors["d2"].tolist() == pytest.approx([3.0, 9.0])  # 9 > 7.81: outside the 95 % ellipsoid
    assert errors["inside95"].tolist() == [True, False]
    figures = accuracy.error_figures(errors)
    assert figures["mean_d2"] == 6.0 and figures["inside95"] == 0.5
    assert figures["along"] == {"n": 2, "median": 4.0, "p90": 5.6}


def _crossing(miss_km: float, tca: float) -> Ephemeris:
    """Three bodies in straight lines on a 120 s grid: 1 along +x, 2 along +y passing ``miss_km`` above
    body 1 (in z) at ``tca``, 3 far away."""
    t = np.arange(0.0, 3601.0, 120.0)
    one = np.stack([7.0 * (t - tca), 0 * t, 0 * t, 7.0 + 0 * t, 0 * t, 0 * t], axis=-1)
    two = np.stack([0 * t, 7.0 * (t - tca), miss_km + 0 * t, 0 * t, 7.0 + 0 * t, 0 * t], axis=-1)
    three = np.stack([0 * t, 0 * t, 0 * t + 9000.0, 0 * t, 0 * t, 0 * t], axis=-1)
    return Ephemeris(np.array([30, 20, 10]), 0.0, 120.0, np.stack([one, two, three]))


def test_true_approaches_by_brute_force_find_the_crossing():
    eph = _crossing(0.5, 1234.5)
    found = accuracy.true_approaches(eph, 0.0, 3600.0, threshold_km=5.0)
    assert found[["primary_id", "secondary_id"]].values.tolist() == [[20, 30]]
    assert found["tca_unix"].iloc[0] == pytest.approx(1234.5, abs=1e-3)
    assert found["miss_m"].iloc[0] == pytest.approx(500.0, abs=1e-3)
    assert accuracy.true_approaches(_crossing(6.0, 1234.5), 0.0, 3600.0, threshold_km=5.0).empty
    # outside the span asked for: not counted
    assert accuracy.true_approaches(eph, 1300.0, 3600.0, threshold_km=5.0).empty


def test_true_closest_near_a_predicted_tca():
    eph = _crossing(0.25, 1800.0)
    tca, miss = accuracy.true_closest(eph, 30, 20, 1800.0 + 240.0)
    assert tca == pytest.approx(1800.0, abs=1e-3) and miss == pytest.approx(250.0, abs=1e-3)
    assert np.isnan(accuracy.true_closest(eph, 30, 99, 1800.0)[1])  # no truth for that body
