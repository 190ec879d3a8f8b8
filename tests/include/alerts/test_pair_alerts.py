"""The alert rules (sda.alerts.assessment.judge) on hand-made cases, and an event of two fused objects whose
density-forecast terms are shared: its Pc and miss probability against the pair covariance written out by hand
in TEME and integrated by tests.cdm_reference's quadrature, and its CDM -- DCP comments, rule comments -- read
back with ccsds-ndm-py and its Pc recomputed from the message alone."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from sda.alerts import assessment
from sda.alerts import cdm as cdm_mod
from sda.alerts.outbox import cdm_text
from sda.alerts.plan import plan_alerts
from sda.config.settings import load_settings
from sda.orbit.screening.fused_refinement import Refined
from tests.cdm_reference import pc2d, pc_of_cdm, read_cdm
from tests.include.alerts.test_alerts import SCREEN_END, SCREEN_START, catalog, events, lines  # noqa: F401


@pytest.fixture(scope="module")
def settings():
    return load_settings(env={})


@pytest.mark.parametrize("pc, miss_m, p_miss, level, rules", [
    (1e-9, 4000.0, 0.2, "yellow", ("miss_probability",)),
    (1e-9, 4000.0, 0.01, "none", ()),
    (1e-9, 4000.0, 0.05, "yellow", ("miss_probability",)),  # at the threshold
    (2e-4, 500.0, 0.9, "red", ("pc", "miss_distance", "miss_probability")),
    (None, 4000.0, 0.06, "yellow", ("miss_probability",)),  # no valid Pc: miss and its probability decide
    (None, 4000.0, None, "none", ()),
    (1e-6, 4000.0, None, "yellow", ("pc",)),
    (1e-9, 999.0, 0.01, "yellow", ("miss_distance",)),
])
def test_judge_rules(settings, pc, miss_m, p_miss, level, rules):
    got_level, reason, got_rules = assessment.judge(pc, miss_m, settings, None, p_miss)
    assert (got_level, got_rules) == (level, rules)
    assert ("P(miss < 1000 m)" in reason) == (p_miss is not None)


def test_judge_follows_the_setting(settings):
    strict = load_settings(env={}, alert_miss_probability=0.5)
    assert assessment.judge(1e-9, 4000.0, settings, None, 0.2)[0] == "yellow"
    assert assessment.judge(1e-9, 4000.0, strict, None, 0.2)[0] == "none"


@dataclasses.dataclass
class _Fused:
    label: str


def _teme_cov(state_km, along_m: float, cross_m: float) -> np.ndarray:
    """A 6x6 TEME covariance: ``along_m`` 1-sigma along the velocity, ``cross_m`` across, small velocity part."""
    v = state_km[3:] / np.linalg.norm(state_km[3:])
    pos = cross_m ** 2 * np.eye(3) + (along_m ** 2 - cross_m ** 2) * np.outer(v, v)
    out = np.eye(6) * 1e-4
    out[:3, :3] = pos
    return out


def test_fused_pair_pc_on_the_shared_density_error(events, catalog, settings, monkeypatch):  # noqa: F811
    ev = events.iloc[0]
    p = np.array([ev[f"p_{c}"] for c in assessment.STATE_COLS], float)
    s = np.array([ev[f"s_{c}"] for c in assessment.STATE_COLS], float)
    sig = (0.25, 0.3)
    g = [np.r_[-900.0 * p[3:] / np.linalg.norm(p[3:]), [0.0, 0.0, 0.3]],
         np.r_[-700.0 * s[3:] / np.linalg.norm(s[3:]), [0.0, 0.2, 0.0]]]
    own = [_teme_cov(p, 60.0, 30.0) + sig[0] ** 2 * np.outer(g[0], g[0]),
           _teme_cov(s, 80.0, 40.0) + sig[1] ** 2 * np.outer(g[1], g[1])]
    refined = Refined(float(ev["tca_unix"]), p, s, own[0], own[1], False, (sig[0], g[0]), (sig[1], g[1]))
    monkeypatch.setattr("sda.alerts.fused.refinements", lambda *a, **k: [refined])
    fused = {101: _Fused("fused/leo/a"), 102: _Fused("fused/leo/b")}
    [row] = assessment.assess(events, None, catalog, settings, fused=fused).to_dict("records")

    # by hand, in TEME: x_i = a_i + sigma_i z g_i, the relative covariance P1 + P2 - s1 s2 (g1 g2' + g2 g1')
    pair = own[0][:3, :3] + own[1][:3, :3] - sig[0] * sig[1] * (np.outer(g[0][:3], g[1][:3]) +
                                                                  np.outer(g[1][:3], g[0][:3]))
    zero = np.zeros((3, 3))
    expected_pc = pc2d(p[:3] * 1e3, p[3:] * 1e3, pair, s[:3] * 1e3, s[3:] * 1e3, zero, 20.0)
    plain_pc = pc2d(p[:3] * 1e3, p[3:] * 1e3, own[0][:3, :3], s[:3] * 1e3, s[3:] * 1e3, own[1][:3, :3], 20.0)
    assert row["pc"] == pytest.approx(expected_pc, rel=1e-6)
    assert abs(expected_pc / plain_pc - 1.0) > 0.05  # the shared term matters here
    expected_p = pc2d(p[:3] * 1e3, p[3:] * 1e3, pair, s[:3] * 1e3, s[3:] * 1e3, zero, 1000.0)
    assert row["miss_probability"] == pytest.approx(expected_p, rel=1e-6)
    assert row["p_dcp_sigma"] == sig[0] and row["s_dcp_sigma"] == sig[1]
    assert row["alert_rule"] is not None and "miss_distance" in row["alert_rule"]

    [alert] = plan_alerts(pd.DataFrame([row]), [], SCREEN_START, SCREEN_END, "r", settings, None).changes
    text = cdm_text(alert)
    reference = read_cdm(text)  # ccsds-ndm-py
    assert all(o["dcp"] is not None for o in reference["objects"])
    assert [o["dcp"][0] for o in reference["objects"]] == list(sig)
    # the sensitivity's length survives the turn to the written state's R/T/N axes
    for o, gi in zip(reference["objects"], g):
        assert np.linalg.norm(o["dcp"][1][:3]) == pytest.approx(np.linalg.norm(gi[:3]), rel=1e-12)
    assert pc_of_cdm(reference) == pytest.approx(alert["pc"], rel=1e-6)
    assert abs(pc_of_cdm(reference, cross_correlation=False) / alert["pc"] - 1.0) > 0.05
    parsed = cdm_mod.parse_cdm(text)
    assert cdm_mod.pc_from_cdm(parsed).pc == pytest.approx(alert["pc"], rel=1e-9)
    comments = [*parsed.header.comments, *parsed.relative.comments]  # KVN: before TCA, either section's
    assert f"ALERT_RULE = {alert['alert_rule']}" in comments
    assert any(c.startswith("MISS_PROBABILITY = ") for c in comments)
