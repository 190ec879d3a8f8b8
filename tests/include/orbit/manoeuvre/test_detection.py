"""Manoeuvre detection (sda.orbit.manoeuvre.detection): passes, the test statistic against a brute-force
computation and its chi-square law, the accumulation rule, the burn prior, and the delta-v estimate
against a burn applied to the estimator's own dynamics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sda.orbit.estimation import dynamics
from sda.orbit.estimation.estimator import OdResult, Prior
from sda.orbit.manoeuvre import detection as mn

T0 = 1_795_132_800.0  # 2026-11-20T00:00:00Z


def test_passes_split_by_sensor_gap_and_length():
    t = np.array([0, 60, 120, 2000, 2060, 30, 90, 0, 500, 1000, 1300, 1800])
    sensor = np.array(["a", "a", "a", "a", "a", "b", "b", "isl", "isl", "isl", "isl", "isl"])
    got = mn.pass_index(t, sensor, gap_s=600.0, max_s=1200.0)
    # passes by first time: a@0 (0), isl@0 (1), b@30 (2), isl@1300 (3: the track cut 1200 s after it
    # opened), a@2000 (4: 1880 s after a's last)
    assert got.tolist() == [0, 0, 0, 4, 4, 2, 2, 1, 1, 1, 3, 3]


def _brute(z, h, p):
    zf, hf = z.ravel(), h.reshape(-1, h.shape[-1])
    s_inv = np.linalg.inv(np.eye(zf.size) + hf @ p @ hf.T)
    f = hf.T @ s_inv @ hf
    g = hf.T @ s_inv @ zf
    return float(g @ np.linalg.solve(f, g))


def test_statistic_matches_brute_force_and_skips_unmeasured():
    rng = np.random.default_rng(1)
    h = rng.normal(size=(12, 2, 6))
    a = rng.normal(size=(6, 6))
    p = a @ a.T + np.eye(6)
    z = rng.normal(size=(12, 2))
    d2, dof = mn.innovation_d2(z, h, p)
    assert dof == 6
    assert d2 == pytest.approx(_brute(z, h, p), rel=1e-8)
    z_nan = z.copy()
    z_nan[3, 1] = np.nan
    keep = np.ones((12, 2), bool)
    keep[3, 1] = False
    d2_nan, _ = mn.innovation_d2(z_nan, h, p)
    zf, hf = z[keep], h[keep]
    assert d2_nan == pytest.approx(_brute(zf[:, None], hf[:, None, :], p), rel=1e-8)


def test_statistic_is_chi_square_without_an_offset_and_large_with_one():
    rng = np.random.default_rng(2)
    h = rng.normal(size=(20, 2, 6)) * np.array([1, 1, 1, 100, 100, 100])
    p = np.diag([1.0, 1.0, 1.0, 1e-4, 1e-4, 1e-4])
    values = []
    for _ in range(2000):
        x = rng.multivariate_normal(np.zeros(6), p)
        z = h @ x + rng.normal(size=(20, 2))
        values.append(mn.innovation_d2(z, h, p)[0])
    # chi-square(6): mean 6, 99th percentile 16.81
    assert np.mean(values) == pytest.approx(6.0, rel=0.08)
    assert np.mean(np.array(values) > 16.81) == pytest.approx(0.01, abs=0.007)
    offset = np.array([0, 0, 0, 0.05, 0, 0])  # five sigma in one velocity component
    z = h @ offset + rng.normal(size=(20, 2))
    assert mn.innovation_d2(z, h, p)[0] > 16.81


def _test(start, d2, dof=7, candidate=False):
    return mn.PassTest(start, start + 300.0, d2, dof, mn.log10_tail(d2, dof), candidate)


def test_a_loud_pass_is_confirmed_by_the_next_one_or_refuted():
    quiet = [_test(T0 + 1000 * k, 5.0) for k in range(4)]
    assert mn.detect(quiet, T0 - 100) is None
    # a pass failing loudly alone, then a consistent one: a bad pass, not a burn
    refuted = quiet[:2] + [_test(T0 + 2000, 90.0), _test(T0 + 3000, 5.0)]
    assert mn.detect(refuted, T0 - 100) is None
    assert mn.pending(refuted) is None
    # the next pass fails too: the burn is declared at it, bracketed from pass 1's start (a burn during it would
    # not show) to the loud pass's end
    mild = stats.chi2.isf(10**-3.5, 7)
    confirmed = quiet[:2] + [_test(T0 + 2000, 90.0), _test(T0 + 3000, mild)]
    found = mn.detect(confirmed, T0 - 100)
    assert (found.first, found.last, found.passes) == (2, 3, 2)
    assert (found.burn_after, found.burn_before, found.detected_at) == (T0 + 1000, T0 + 2300, T0 + 3300)
    assert found.log10_p == pytest.approx(stats.chi2.logsf(90.0 + mild, 14) / math.log(10))
    # the loud pass is the window's last: it waits for the next pass (an unmeasured pass does not count)
    waiting = quiet[:2] + [_test(T0 + 2000, 90.0), _test(T0 + 3000, 0.0, dof=0)]
    assert mn.detect(waiting, T0 - 100) is None
    assert mn.pending(waiting) == 2
    assert mn.pending(quiet[:2] + [_test(T0 + 2000, mild)]) is None  # suspicious, but not enough to decide alone


def test_a_waiting_pass_holds_back_the_passes_that_overlap_it():
    # pass 1 (1000-1300) is consistent, pass 2 (1200-1500, another sensor) waits; pass 1 has not ended when
    # pass 2 starts, so it waits too; pass 0 ended before: it is fitted
    tests = [_test(T0, 5.0), _test(T0 + 1000, 5.0), _test(T0 + 1200, 90.0)]
    assert mn.pending(tests) == 2
    assert mn.held_back(tests, 2) == [1, 2]
    chained = [_test(T0, 5.0), _test(T0 + 250, 5.0), _test(T0 + 1000, 5.0), _test(T0 + 1200, 90.0)]
    assert mn.held_back(chained, 3) == [2, 3]  # pass 1 (250-550) ended before pass 2 started
    overlapping = [_test(T0, 5.0), _test(T0 + 800, 5.0), _test(T0 + 1000, 5.0), _test(T0 + 1200, 90.0)]
    assert mn.held_back(overlapping, 3) == [1, 2, 3]  # 800-1100 overlaps 1000-1300, which overlaps the waiting one


def test_mild_passes_accumulate():
    # chi-square(7) tail 10^-3.5 each: one pass alone gives 10^-3.5, two 10^-5.9, three 10^-8.3 (21 dof)
    quiet = [_test(T0, 5.0)]
    mild = stats.chi2.isf(10**-3.5, 7)
    runs = quiet + [_test(T0 + 1000 * k, mild) for k in (1, 2, 3)]
    found = mn.detect(runs, T0 - 100)
    assert (found.first, found.last) == (1, 3)
    assert found.log10_p == pytest.approx(stats.chi2.logsf(3 * mild, 21) / math.log(10))
    broken = quiet + [_test(T0 + 1000, mild), _test(T0 + 2000, 5.0), _test(T0 + 3000, mild)]
    assert mn.detect(broken, T0 - 100) is None  # a consistent pass between restarts the run
    assert mn.detect(runs, T0 - 100, mn.ManoeuvreSettings(confirm_passes=4)) is None


def test_latest_run_is_the_shortest_end_that_still_detects():
    """A mild pass (10^-3.5) then a loud one: the run starts at the mild one; the other reading is the loud one
    alone, bracketed from the mild pass's start to the loud one's end. Three mild passes: only the whole run
    detects (10^-8.3; two of them 10^-5.9), so there is no other reading."""
    quiet = [_test(T0 + 1000 * k, 5.0) for k in range(2)]
    mild = stats.chi2.isf(10**-3.5, 7)
    found = mn.detect(quiet + [_test(T0 + 2000, mild), _test(T0 + 3000, 90.0)], T0 - 100)
    assert (found.first, found.last) == (2, 3)
    tests = quiet + [_test(T0 + 2000, mild), _test(T0 + 3000, 90.0)]
    other = mn.latest_run(tests, found, T0 - 100)
    assert (other.first, other.last, other.dof) == (3, 3, 7)
    assert (other.burn_after, other.burn_before, other.detected_at) == (T0 + 2000, T0 + 3300, T0 + 3300)
    assert other.log10_p == pytest.approx(stats.chi2.logsf(90.0, 7) / math.log(10))
    runs = quiet[:1] + [_test(T0 + 1000 * k, mild) for k in (1, 2, 3)]
    assert mn.latest_run(runs, mn.detect(runs, T0 - 100), T0 - 100) is None


def test_burn_prior_widens_by_what_a_burn_can_do():
    prior = Prior(T0 + 3600.0, np.zeros(6), np.eye(6), 0.05, 0.02, "fused")
    got = mn.burn_prior(prior, T0, mn.ManoeuvreSettings(dv_sigma_ms=2.0))
    tau, var = 3600.0, 4.0
    assert got.covariance[0, 0] == pytest.approx(1.0 + var * tau**2 / 3.0)
    assert got.covariance[0, 3] == pytest.approx(var * tau / 2.0)
    assert got.covariance[3, 3] == pytest.approx(1.0 + var)
    assert got.covariance[0, 1] == 0.0 and got.source == "manoeuvre"


def _result(t, state_gcrf, cov_sigma_m=5.0, cov_sigma_ms=0.005):
    rot = dynamics.teme_rotation([t])[0]
    state = np.concatenate([rot @ state_gcrf[:3], rot @ state_gcrf[3:]])
    cov = np.diag([cov_sigma_m**2] * 3 + [cov_sigma_ms**2] * 3 + [1e-6])
    return OdResult(t, state, cov, 0.02, t - 3600.0, t, {}, {}, 0, 1.0, 3, "converged")


def test_delta_v_recovers_a_burn_applied_to_the_dynamics():
    r0 = np.array([6878.137e3, 0.0, 0.0])
    v0 = np.array([0.0, 7612.6 * math.cos(math.radians(53)), 7612.6 * math.sin(math.radians(53))])
    x0 = np.concatenate([r0, v0])
    t_burn, t_end = T0 + 1800.0, T0 + 3 * 3600.0
    pre_end = dynamics.propagate(T0, x0, 0.02, [t_burn]).x[0]
    radial, along = pre_end[:3] / np.linalg.norm(pre_end[:3]), None
    cross = np.cross(pre_end[:3], pre_end[3:])
    cross /= np.linalg.norm(cross)
    along = np.cross(cross, radial)
    dv_rtn = np.array([0.1, 0.6, -0.2])
    kicked = pre_end + np.concatenate([np.zeros(3), dv_rtn @ np.stack([radial, along, cross])])
    post_end = dynamics.propagate(t_burn, kicked, 0.02, [t_end]).x[0]
    got = mn.estimate_dv(_result(T0, x0), _result(t_end, post_end), T0 + 600.0, T0 + 3000.0,
                         mn.ProcessNoise(accel_psd=0.0, drag_fraction=0.0), grid=241)
    assert abs(got.t_burn - t_burn) <= 60.0
    # along- and cross-track to 0.02 m/s; the radial part trades off against the burn time (30 s here)
    assert np.allclose(got.dv_rtn_ms[1:], dv_rtn[1:], atol=0.02)
    assert abs(got.dv_rtn_ms[0] - dv_rtn[0]) < 0.06
    assert got.d2 > mn.ManoeuvreSettings().min_dv_d2
