"""Alerts judged against the truth (sda.sim.alert_truth, sda.sim.score_command), on hand-made crossings
whose true closest approach is known by construction."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from sda.sim import alert_truth, score_command
from sda.sim.dynamics import Ephemeris

T0 = dt.datetime(2026, 11, 28, tzinfo=dt.timezone.utc)


def _straight_lines(misses_km: dict[tuple[int, int], float], tca: float) -> Ephemeris:
    """For each pair (a, b): a along +x through (0, 0, z), b along +y through (0, 0, z + miss) at ``tca``; pairs
    100 km apart in z, on a 120 s grid."""
    t = np.arange(0.0, 3601.0, 120.0)
    ids, states = [], []
    for k, ((a, b), miss) in enumerate(misses_km.items()):
        z = 100.0 * k
        states.append(np.stack([7.0 * (t - tca), 0 * t, z + 0 * t, 7.0 + 0 * t, 0 * t, 0 * t], axis=-1))
        states.append(np.stack([0 * t, 7.0 * (t - tca), z + miss + 0 * t, 0 * t, 7.0 + 0 * t, 0 * t], axis=-1))
        ids += [a, b]
    return Ephemeris(np.array(ids), T0.timestamp(), 120.0, np.stack(states))


def _alert(p, s, miss_m, p_src, s_src, status="open", tca_s=1800.0, cdm="x.cdm"):
    return {"alert_id": f"{p}-{s}", "status": status, "primary_id": p, "secondary_id": s,
            "tca": T0 + dt.timedelta(seconds=tca_s), "miss_m": miss_m, "p_cov_source": p_src,
            "s_cov_source": s_src, "cdm_file": cdm}


def test_alerts_grouped_by_the_orbits_they_used_and_scored_against_the_true_miss():
    eph = _straight_lines({(1, 2): 0.2, (3, 4): 0.5, (5, 6): 1.0, (99901, 99902): 0.15}, 1800.0)
    alerts = pd.DataFrame([
        _alert(1, 2, 260.0, "fused/LEO/a", "fused/LEO/b"),         # truth 200 m: 60 m off
        _alert(3, 4, 400.0, "fused/LEO/c", "tle/LEO"),             # truth 500 m: 100 m off
        _alert(5, 6, 1300.0, "tle/LEO", "observed/LEO"),           # truth 1000 m: 300 m off
        _alert(5, 6, 50.0, "tle/LEO", "tle/LEO", status="closed"),  # closed: not scored
        _alert(99901, 99902, 170.0, "fused/LEO/d", "fused/LEO/e", tca_s=1830.0),  # truth 150 m: 20 m off
    ])
    figures = alert_truth.alert_figures(eph, alerts)
    assert figures["open_alerts"] == 4
    assert figures["both_fused"]["alerts"] == 2
    assert figures["both_fused"]["miss_error_median_m"] == pytest.approx(40.0, abs=0.01)  # median of 60 and 20
    assert figures["one_fused"]["miss_error_median_m"] == pytest.approx(100.0, abs=0.01)
    assert figures["catalogue_only"] == {"alerts": 1, "scored": 1,
                                         "miss_error_median_m": pytest.approx(300.0, abs=0.01),
                                         "miss_error_p90_m": pytest.approx(300.0, abs=0.01)}
    pair = figures["pair"]
    assert pair["true_miss_m"] == pytest.approx(150.0, abs=0.01)
    assert pair["miss_error_m"] == pytest.approx(20.0, abs=0.01)
    assert (pair["primary_orbit"], pair["secondary_orbit"]) == ("fused", "fused")


def test_an_alert_the_truth_cannot_judge_is_counted_not_scored():
    eph = _straight_lines({(1, 2): 0.2}, 1800.0)
    alerts = pd.DataFrame([_alert(1, 2, 200.0, "tle/LEO", "tle/LEO"), _alert(1, 7, 200.0, "tle/LEO", "tle/LEO")])
    figures = alert_truth.alert_figures(eph, alerts)
    assert figures["catalogue_only"]["alerts"] == 2 and figures["catalogue_only"]["scored"] == 1
    assert figures["pair"] is None
    assert "injected pair: no open alert" in score_command.lines(figures)


def test_covariance_methods_are_read_from_the_cdm_text():
    text = ("CCSDS_CDM_VERS = 1.0\nOBJECT = OBJECT1\n  COVARIANCE_METHOD = CALCULATED\n"
            "OBJECT = OBJECT2\nCOVARIANCE_METHOD = DEFAULT\n")
    assert score_command.covariance_methods(text) == ["CALCULATED", "DEFAULT"]


def test_the_newest_truth_in_the_landing_zone(tmp_path):
    assert score_command.newest_truth(tmp_path) is None
    (tmp_path / "_truth").mkdir()
    old, new = tmp_path / "_truth" / "sim_a.summary.json", tmp_path / "_truth" / "sim_b.summary.json"
    old.write_text("{}")
    new.write_text("{}")
    import os

    os.utime(old, (1000, 1000))
    os.utime(new, (2000, 2000))
    assert score_command.newest_truth(tmp_path) == new


def test_a_subset_of_the_truth_keeps_its_bodies_states_and_burns():
    eph = _straight_lines({(1, 2): 0.2, (3, 4): 0.5}, 1800.0)
    before, after = eph.states[3, 10].copy(), eph.states[3, 10] + np.array([0, 0, 0, 0, 0, 0.01])
    eph.burns = [(3, T0.timestamp() + 1200.0, before, after), (0, T0.timestamp() + 600.0, before, after)]
    sub = eph.subset([3, 1])
    assert sub.norad.tolist() == [4, 2]
    np.testing.assert_array_equal(sub.states[0], eph.states[3])
    assert [(b[0], b[1]) for b in sub.burns] == [(0, T0.timestamp() + 1200.0)]  # body 4's burn, row 3 -> 0
    t = T0.timestamp() + np.array([100.0, 1300.0, 2500.0])
    r_sub, _ = sub.at_pairs(np.array([0, 1, 0]), t)
    r_all, _ = eph.at_pairs(np.array([3, 1, 3]), t)
    np.testing.assert_allclose(r_sub, r_all)


def test_the_injected_pair_is_judged_at_its_designed_encounter_not_at_another_approach():
    eph = _straight_lines({(99901, 99902): 0.15}, 1800.0)
    # the same pair alerted again at another time (the lines diverge there: the truth finds no approach
    # within 10 minutes, or a far one)
    alerts = pd.DataFrame([_alert(99901, 99902, 700.0, "fused/LEO/a", "fused/LEO/b", tca_s=3000.0),
                           _alert(99901, 99902, 156.0, "fused/LEO/a", "fused/LEO/b", tca_s=1800.0)])
    by_tca = alert_truth.alert_figures(eph, alerts, pair_tca_unix=T0.timestamp() + 1800.0)["pair"]
    assert by_tca["miss_m"] == 156.0 and by_tca["miss_error_m"] == pytest.approx(6.0, abs=0.01)
    closest = alert_truth.alert_figures(eph, alerts)["pair"]  # without it: the one the truth puts closest
    assert closest["miss_m"] == 156.0


def test_alerts_counted_per_rule_with_the_truly_far_ones():
    eph = _straight_lines({(1, 2): 0.2, (3, 4): 6.0, (5, 6): 1.0}, 1800.0)
    alerts = pd.DataFrame([
        {**_alert(1, 2, 260.0, "tle/LEO", "tle/LEO"), "alert_rule": "pc,miss_distance"},  # truth 200 m
        {**_alert(3, 4, 2500.0, "tle/LEO", "tle/LEO"), "alert_rule": "miss_probability"},  # truth 6 km
        {**_alert(5, 6, 900.0, "tle/LEO", "tle/LEO"), "alert_rule": "miss_distance,miss_probability"},  # 1 km
    ])
    assert alert_truth.alert_figures(eph, alerts)["by_rule"] == {
        "pc": {"alerts": 1, "true_miss_over_5km": 0}, "miss_distance": {"alerts": 2, "true_miss_over_5km": 0},
        "miss_probability": {"alerts": 2, "true_miss_over_5km": 1}}
    assert alert_truth.alert_figures(eph, alerts.drop(columns="alert_rule"))["by_rule"] == {}
