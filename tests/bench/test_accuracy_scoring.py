"""bench/accuracy.py's covariance-realism statistics (bench/accuracy_stats.py), the fused orbits' figures per lead
(bench/accuracy_positions.py) and the alert CDMs' relative-position d^2 (bench/accuracy_cdm.py), on hand-made
samples, states and covariances whose figures are worked out by hand."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest
from accuracy_cdm import cdm_d2, read_dcp, relative_covariance, relative_d2, score_alert_cdms
from accuracy_events import by_rule
from accuracy_positions import HOURS, group_figures
from accuracy_stats import chi2_test, d2_figures, hourly_test, mahalanobis_d2
from scipy import stats

from sda.alerts.cdm import new_cdm, write_cdm
from sda.alerts.cdm_model import Dcp
from sda.orbit import inertial


def test_d2_figures_of_a_hand_made_sample():
    assert d2_figures([1.0, 2.0, 3.0, 10.0, np.nan]) == {"count": 4, "mean_d2": 4.0, "median_d2": 2.5,
                                                         "inside95": 0.75}
    assert d2_figures([]) == {"count": 0, "mean_d2": None, "median_d2": None, "inside95": None}


def test_mahalanobis_d2_with_a_correlated_covariance():
    # [[2, 1], [1, 2]]^-1 = [[2, -1], [-1, 2]] / 3: (1, 1) gives 2/3, and 1 from the third axis
    cov = np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 1.0]])
    assert mahalanobis_d2([1.0, 1.0, 1.0], cov) == pytest.approx(5.0 / 3.0)
    assert mahalanobis_d2([[1.0, 2.0, 2.0]], [np.diag([1.0, 4.0, 4.0])]) == pytest.approx([3.0])


def test_a_chi_square_3_sample_passes_and_the_same_scaled_fails():
    sample = stats.chi2(3).rvs(200, random_state=np.random.default_rng(2))
    right = chi2_test(sample)
    assert right["n"] == 200 and right["passes"] is True and right["p"] > 0.3
    assert chi2_test(3.0 * sample)["passes"] is False  # a covariance 3x too small
    assert chi2_test(sample / 3.0)["passes"] is False  # 3x too large


def test_the_right_mean_with_the_wrong_shape_fails():
    constant = np.full(100, 3.0)  # mean 3 as chi-square(3), but no spread at all
    assert d2_figures(constant)["mean_d2"] == 3.0
    assert chi2_test(constant)["passes"] is False


def test_too_few_values_are_not_tested():
    assert chi2_test([1.0, 2.0, 3.0]) == {"n": 3, "p": None, "passes": None,
                                          "note": "fewer than 20 values: not tested"}


def _quantiles(n: int) -> np.ndarray:
    """A sample shaped exactly as chi-square(3): its quantiles at (i + 0.5) / n."""
    return stats.chi2(3).ppf((np.arange(n) + 0.5) / n)


def test_hourly_test_counts_the_hours_that_pass():
    good = _quantiles(40)
    d2 = np.column_stack([good] * 10 + [3.0 * good] * 15)  # 40 objects, 25 hours: 10 realistic, 15 too tight
    out = hourly_test(d2)
    assert (out["objects"], out["times"], out["tested"], out["passed"]) == (40, 25, 25, 10)
    assert out["pass_share"] == 0.4
    assert len(out["p_values"]) == 25 and out["p_values"][0] > 0.99 and out["p_values"][-1] < 1e-6


def test_hourly_test_leaves_small_groups_untested():
    out = hourly_test(np.ones((19, 25)))
    assert out["pass_share"] is None and out["tested"] == 0 and "fewer than 20 objects" in out["note"]


def test_group_figures_read_each_lead_from_its_hour():
    hours = len(HOURS)
    scored = []
    for k, d2 in enumerate((1.0, 2.0, 9.0)):
        fused = 100.0 * (k + 1) + np.arange(hours)  # object k's error at hour h: 100 (k + 1) + h m
        catalogue = 1000.0 * (k + 1) + np.arange(hours)
        scored.append(np.stack([fused, catalogue, np.full(hours, d2)]))
    out = group_figures(scored)
    assert out["objects"] == 3 and set(out["leads"]) == {"0h", "6h", "24h"}
    # at 6 h: errors 106, 206, 306 (p90: 206 + 0.8 x 100), catalogue 1006, 2006, 3006; d^2 1, 2, 9
    assert out["leads"]["6h"] == {"objects": 3, "fused_median_m": 206.0, "fused_p90_m": 286.0,
                                  "catalogue_median_m": 2006.0, "ratio": 0.1027, "mean_d2": 4.0, "median_d2": 2.0,
                                  "inside95": 0.6667}
    assert out["leads"]["24h"]["fused_median_m"] == 224.0
    assert out["hourly_test"]["pass_share"] is None  # 3 objects: not tested
    assert group_figures([]) == {"objects": 0}


# --- the alert CDMs -----------------------------------------------------------------------------------------------
# OBJECT1 at (7000, 0, 0) km moving along y: its R, T, N are x, y, z, so its RTN covariance diag(1, 4, 9) m^2 is
# diag(1, 4, 9) in EME2000. OBJECT2 at (7000.1, 0, 0) km moving along z: R = x, N = r x v / |r x v| = -y and
# T = N x R = z, so its diag(16, 25, 36) is 16 on x, 36 on y and 25 on z. Their sum: diag(17, 40, 34). The CDM's
# relative position is (100, 0, 0) m; a true one of (104, 6, -3.4) m is off by (4, 6, -3.4):
# d^2 = 16/17 + 36/40 + 11.56/34.
STATE1_KM = np.array([7000.0, 0.0, 0.0, 0.0, 7.5, 0.0])
STATE2_KM = np.array([7000.1, 0.0, 0.0, 0.0, 0.0, 7.5])
COV1, COV2 = np.diag([1.0, 4.0, 9.0, 1e-4, 1e-4, 1e-4]), np.diag([16.0, 25.0, 36.0, 1e-4, 1e-4, 1e-4])
TRUE_REL_M = np.array([104.0, 6.0, -3.4])
D2 = 16.0 / 17.0 + 36.0 / 40.0 + 11.56 / 34.0
# With CARA's DCP terms: OBJECT1's position sensitivity (0, 10, 0) on its R/T/N axes is (0, 10, 0) in EME2000,
# OBJECT2's (0, 0, 5) is 5 along its N = -y: (0, -5, 0). sigma 0.2 and 0.4: the shared part
# 0.2 x 0.4 x (g1 g2' + g2 g1') has -0.08 x 100 = -8 on y, y, which the pair's covariance subtracts: 40 + 8 = 48.
DCP = ((0.2, [0.0, 10.0, 0.0, 0.01, 0.0, 0.0]), (0.4, [0.0, 0.0, 5.0, 0.0, 0.02, 0.0]))
D2_PAIR = 16.0 / 17.0 + 36.0 / 48.0 + 11.56 / 34.0
TCA = dt.datetime(2026, 11, 21, 9, 0, 0, tzinfo=dt.timezone.utc)
TCA_NS = 1_795_251_600 * 10**9


def _objects() -> list[dict]:
    return [{"r": s[:3] * 1000.0, "v": s[3:] * 1000.0, "cov_rtn": c[:3, :3]} for s, c in ((STATE1_KM, COV1),
                                                                                            (STATE2_KM, COV2))]


def test_relative_covariance_turns_each_object_from_its_own_rtn_axes():
    assert np.allclose(relative_covariance(_objects()), np.diag([17.0, 40.0, 34.0]), atol=1e-9)
    assert relative_d2(_objects(), TRUE_REL_M) == pytest.approx(D2, rel=1e-9)


class _Truth:
    """Two bodies, 70001 and 70002, at fixed TEME positions: the EME2000 ones rotated to TEME of date at the TCA."""

    def __init__(self, eme_m: np.ndarray):
        self.norad = np.array([70001, 70002])
        self._teme_km = (inertial.eme2000_to_teme(TCA_NS) @ eme_m.T).T / 1000.0

    def at_pairs(self, index, unix_s):
        assert np.allclose(unix_s, TCA_NS / 1e9)
        return self._teme_km[np.asarray(index)], np.zeros((len(index), 3))


def _write_cdm(path, first: str = "70001", dcp: bool = False) -> None:
    cdm = new_cdm(tca="2026-11-21T09:00:00.000000", originator="TEST", message_id="m",
                  creation_date="2026-11-21T06:00:00", state1_km=STATE1_KM, cov1_rtn=COV1, state2_km=STATE2_KM,
                  cov2_rtn=COV2, hbr_m=10.0,
                  object1={"OBJECT_DESIGNATOR": first}, object2={"OBJECT_DESIGNATOR": "70002"})
    if dcp:
        for o, (sigma, g) in zip(cdm.objects, DCP):
            o.set_dcp(Dcp(sigma, g))
    path.write_text(write_cdm(cdm))


def _truth() -> _Truth:
    p1 = STATE1_KM[:3] * 1000.0
    return _Truth(np.array([p1, p1 + TRUE_REL_M]))


def test_a_cdm_file_against_the_truth_in_teme(tmp_path):
    _write_cdm(tmp_path / "a.cdm")
    assert cdm_d2(tmp_path / "a.cdm", _truth()) == pytest.approx((D2, D2), rel=1e-6)  # no DCP: pair = sum
    _write_cdm(tmp_path / "b.cdm", first="SAT-A")  # not a catalogue number: not scored
    assert np.isnan(cdm_d2(tmp_path / "b.cdm", _truth())).all()


def test_alert_cdms_are_split_by_the_orbits_the_alerts_used(tmp_path):
    for name in ("both.cdm", "one.cdm", "none.cdm", "closed.cdm"):
        _write_cdm(tmp_path / name)
    alerts = pd.DataFrame({
        "status": ["new", "updated", "new", "closed", "new"],
        "cdm_file": ["both.cdm", "one.cdm", "none.cdm", "closed.cdm", "gone.cdm"],
        "p_cov_source": ["fused/LEO/a", "fused/LEO/b", "tle/LEO", "fused/LEO/c", "observed/LEO"],
        "s_cov_source": ["fused/LEO/d", "observed/LEO", "tle/LEO", "fused/LEO/e", "tle/LEO"]})
    out = score_alert_cdms(_truth(), alerts, tmp_path)
    assert out["cdm_files_missing"] == 1
    assert (out["all"]["alerts"], out["all"]["count"]) == (4, 3)
    assert out["all"]["mean_d2"] == pytest.approx(D2, abs=1e-3)
    assert [out[g]["alerts"] for g in ("both_fused", "one_fused", "catalogue_only")] == [1, 1, 2]
    assert [out[g]["count"] for g in ("both_fused", "one_fused", "catalogue_only")] == [1, 1, 1]
    assert out["both_fused"]["test"]["passes"] is None  # one CDM: not tested


def test_a_cdm_with_dcp_terms_scored_on_the_pair_covariance(tmp_path):
    _write_cdm(tmp_path / "a.cdm", dcp=True)
    assert cdm_d2(tmp_path / "a.cdm", _truth()) == pytest.approx((D2_PAIR, D2), rel=1e-6)
    objects = _objects()
    objects[0]["dcp"], objects[1]["dcp"] = ((s, np.array(g[:3])) for s, g in DCP)
    assert np.allclose(relative_covariance(objects), np.diag([17.0, 48.0, 34.0]), atol=1e-9)
    objects[1]["dcp"] = None  # one object's terms only: none subtracted, as CARA
    assert np.allclose(relative_covariance(objects), np.diag([17.0, 40.0, 34.0]), atol=1e-9)


def test_read_dcp_needs_all_three_lines():
    lines = ["DCP Density Forecast Uncertainty = 2.5e-01", "DCP Sensitivity Vector RTN Pos = 1 -2.5e3 3 [m]",
             "DCP Sensitivity Vector RTN Vel = 4 5 6 [m/sec]", "HBR = 20 [m]"]
    sigma, g = read_dcp(lines)
    assert sigma == 0.25 and g.tolist() == [1.0, -2500.0, 3.0]
    assert read_dcp(lines[:2]) is None and read_dcp([]) is None


def test_alerts_by_rule_against_the_truth():
    alerts = pd.DataFrame({"alert_rule": ["pc,miss_distance", "miss_probability", "miss_distance,miss_probability",
                                          None, "miss_probability"],
                           "true_miss_m": [400.0, 6000.0, 900.0, 3000.0, 2000.0]})
    out = by_rule(alerts)
    assert out["pc"] == {"alerts": 1, "truly_under_1km": 1, "true_miss_over_5km": 0}
    assert out["miss_distance"] == {"alerts": 2, "truly_under_1km": 2, "true_miss_over_5km": 0}
    assert out["miss_probability"] == {"alerts": 3, "truly_under_1km": 1, "true_miss_over_5km": 1}
    assert out["miss_probability_only"] == {"alerts": 2, "truly_under_1km": 0, "true_miss_over_5km": 1}
    assert out["pc_only"]["alerts"] == 0 and out["miss_distance_only"]["alerts"] == 0
    assert by_rule(alerts.drop(columns="alert_rule")) == {}  # an outbox from before the rules
