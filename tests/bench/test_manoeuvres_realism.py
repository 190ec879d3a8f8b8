"""bench/manoeuvres_realism.py: the post-burn orbit's covariance realism and the echo counts, on hand-made rows,
predictions and detections (no simulation)."""

from __future__ import annotations

import importlib
import types

import numpy as np
import pytest

from bench import manoeuvres_realism as R

H = 3600.0
ARC = 6 * H


def test_d2_takes_the_error_to_metres_and_reads_the_position_block():
    cov = np.zeros((6, 6))
    cov[:3, :3] = np.diag([100.0**2, 200.0**2, 50.0**2])  # m^2
    cov[3:, 3:] = np.eye(3) * 1e-9  # the velocity block: not read
    # errors 100 m, -200 m, 100 m: 1 + 1 + 4
    assert R.position_d2([7000.1, -0.2, 0.1], cov, [7000.0, 0.0, 0.0]) == pytest.approx(6.0)
    # correlated x-y: the inverse of [[4, 2], [2, 2]] is [[0.5, -0.5], [-0.5, 1]]; error (2, 0, 1) m: 2 + 1
    full = np.array([[4.0, 2.0, 0.0], [2.0, 2.0, 0.0], [0.0, 0.0, 1.0]])
    assert R.position_d2([0.002, 0.0, 0.001], full, [0.0, 0.0, 0.0]) == pytest.approx(3.0)


def test_passes_with_their_middle_observation():
    # radar 0..300 s (4 observations: the middle is the second), then 1000 s alone (700 s on: a pass of its own);
    # ISL every 60 s from 50 s, 26 of them: cut after 1200 s into 50..1250 (21 observations, middle 650 s) and
    # 1310..1550 (5, middle 1430 s)
    t = [0.0, 100.0, 200.0, 300.0, 1000.0] + [50.0 + 60.0 * k for k in range(26)]
    sensor = ["radar"] * 5 + ["isl"] * 26
    assert R.pass_middles(t, sensor) == [(0.0, 100.0, 300.0), (50.0, 650.0, 1250.0), (1000.0, 1000.0, 1000.0),
                                         (1310.0, 1430.0, 1550.0)]
    assert R.pass_middles([], []) == []


def test_the_next_passes_after_the_epoch_and_those_a_burn_precedes():
    passes = [(10.0, 15.0, 20.0), (30.0, 35.0, 40.0), (50.0, 55.0, 60.0), (70.0, 75.0, 80.0)]
    assert R.pass_targets(10.0, passes, []) == [35.0, 55.0, 75.0]  # the pass starting at the epoch is not next
    assert R.pass_targets(10.0, passes, [45.0]) == [35.0, None, None]  # the burn is before the 2nd pass's end
    assert R.pass_targets(10.0, passes, [10.0]) == [35.0, 55.0, 75.0]  # a burn at the epoch: the fit saw it
    assert R.pass_targets(10.0, passes, [40.0]) == [None, None, None]  # at the pass's end: skipped
    assert R.pass_targets(5.0, passes, [90.0], count=2) == [15.0, 35.0]
    assert R.pass_targets(65.0, passes, []) == [75.0]  # fewer passes left


def row(k: int, status: str = "converged", prior: str = "fused", manoeuvres: int = 0) -> dict:
    return {"window_start_unix": k * ARC, "status": status, "prior_source": prior, "epoch_unix": (k + 1) * ARC - 60,
            "manoeuvres": [{"seq": s} for s in range(manoeuvres)]}


def test_the_two_populations_and_the_reference_cap():
    fused = {2: ([row(0, prior="catalogue"), row(1, prior="manoeuvre", manoeuvres=2), row(2)], 1.0),
             1: ([row(0, prior="catalogue", manoeuvres=0), row(1, status="failed", manoeuvres=0), row(2), row(3)], 1.0)}
    after = R.post_burn_rows(fused)
    assert [(n, r["window_start_unix"]) for n, r in after] == [(2, ARC)]
    ref, total = R.reference_rows(fused)
    assert total == 3 and [(n, r["window_start_unix"] / ARC) for n, r in ref] == [(1, 2), (1, 3), (2, 2)]
    many = {n: ([row(k) for k in range(1, 11)], 1.0) for n in range(10)}  # 100 rows, 10 kept: every 11th
    ref, total = R.reference_rows(many, cap=10)
    assert total == 100 and len(ref) == 10
    assert [(n, r["window_start_unix"] / ARC) for n, r in ref][:3] == [(0, 1), (1, 2), (2, 3)]  # rows 0, 11, 22
    assert ref[-1][0] == 9 and ref[-1][1]["window_start_unix"] == 10 * ARC  # the last row kept


def detection(norad: int, window: int, at_h: float, outcome: str) -> dict:
    return {"norad_id": norad, "window_start_unix": window * ARC, "detected_at_unix": at_h * H,
            "burn_after_unix": at_h * H - H, "outcome": outcome}


def test_echoes_across_a_window_boundary_and_within_a_window():
    fused = {1: ([row(0, prior="catalogue"), row(1, prior="manoeuvre", manoeuvres=1), row(2, status="failed"),
                  row(3, prior="manoeuvre", manoeuvres=2)], 1.0),
             2: ([row(0, prior="catalogue"), row(1), row(2, prior="manoeuvre", manoeuvres=1)], 1.0)}
    dets = [detection(1, 1, 8, "matched"),
            detection(1, 3, 20, "false"),  # window 3's prior is window 1's post-burn re-fit (window 2 failed)
            detection(1, 3, 22, "duplicate"),  # and after the detection at 20 h in the same window
            detection(2, 2, 14, "false")]  # window 2's prior (window 1) held no detection
    out = R.echoes(dets, fused)
    assert out["unmatched"] == {"detections": 3, "after_post_burn_prior": 2, "after_earlier_detection_same_window": 1,
                                "either": 2, "neither": 1}
    assert out["matched"] == {"detections": 1, "after_post_burn_prior": 0, "after_earlier_detection_same_window": 0,
                              "either": 0, "neither": 1}
    assert out["by_outcome"]["false"]["after_post_burn_prior"] == 1 and out["by_outcome"]["false"]["neither"] == 1
    assert out["by_outcome"]["duplicate"]["either"] == 1
    assert R.window_prior(fused[1][0], 3 * ARC)["window_start_unix"] == ARC
    assert R.window_prior(fused[1][0], 0.0) is None and not R.is_post_burn(None)


def sample(k: int, d2: float | None, regime: str = "LEO", burn: bool = False) -> dict:
    return {"k": k, "d2": d2, "regime": regime, "skipped": d2 is None, "error_m": None if d2 is None else 10.0 * k,
            "lead_h": None if d2 is None else float(k), "burn_in_fit": burn}


def test_the_figures_of_a_population():
    samples = ([sample(0, v) for v in (0.5, 1.5, 1.0, 1.0, 1.0)] + [sample(0, 1.0, "GEO", burn=True)]  # six rows
               + [sample(1, v) for v in (1.0, 2.0, 3.0)] + [sample(1, 10.0, "GEO", burn=True)]
               + [sample(1, None), sample(2, 5.0), sample(2, None)])
    out = R.summarise(samples, band=True)
    assert out["rows"] == 6 and out["at_epoch"]["count"] == 6 and out["at_epoch"]["mean_d2"] == 1.0
    assert out["at_epoch"]["error_m"]["median"] == 0.0
    nxt = out["next_pass"]
    assert (nxt["count"], nxt["mean_d2"], nxt["median_d2"], nxt["inside95"]) == (4, 4.0, 2.5, 0.75)
    assert nxt["in_issue_band"] is False and nxt["skipped_burn_before_pass"] == 1 and nxt["no_such_pass"] == 1
    assert nxt["by_regime"]["LEO"]["inside95"] == 1.0 and nxt["by_regime"]["GEO"]["count"] == 1
    assert nxt["lead_h"]["median"] == 1.0 and nxt["error_m"]["max"] == 10.0
    assert out["skipped_burn_before_next_pass"] == 1
    assert out["pass_2"]["count"] == 1 and out["pass_2"]["no_such_pass"] == 4 and out["pass_3"]["count"] == 0
    clean = out["without_true_burn_in_fit"]  # the GEO row's fit spans a burn
    assert clean["rows"] == 5 and clean["next_pass"]["no_such_pass"] == 1 and "lead_h" not in clean["next_pass"]
    assert (clean["next_pass"]["count"], clean["next_pass"]["mean_d2"], clean["next_pass"]["inside95"]) == (3, 2.0, 1.0)
    assert clean["next_pass"]["in_issue_band"] is False  # 1.0: above the band
    assert "in_issue_band" not in R.summarise(samples, band=False)["next_pass"]
    band = R.summarise([sample(0, 1.0)] * 20 + [sample(1, 1.0)] * 19 + [sample(1, 9.0)], band=True)["next_pass"]
    assert band["inside95"] == 0.95 and band["in_issue_band"] is True and band["no_such_pass"] == 0


def test_a_row_predicted_to_its_next_passes_against_a_known_truth(monkeypatch):
    """A fake prediction (positions in km, covariances in m^2) and a fake truth 300 m off along x at each time:
    d2 = 300^2 / 100^2 = 9 where the x variance is 100^2 m^2, 300^2 / 400^2 where it is 400^2."""
    predict_module = importlib.import_module("sda.orbit.estimation.predict")  # the package's name is the function
    arcs = importlib.import_module("sda.orbit.fusion.arcs")

    def fake_predict(result, times, noise=None):
        times = np.asarray(times, float)
        sigma = np.where(times > 7 * H, 400.0, 100.0)
        cov = np.zeros((len(times), 6, 6))
        cov[:, 0, 0], cov[:, 1, 1], cov[:, 2, 2] = sigma**2, 1.0, 1.0
        return types.SimpleNamespace(r_km=np.tile([7000.0, 0.0, 0.0], (len(times), 1)), covariance=cov)

    class Truth:
        def rows(self, ids):
            return np.zeros(len(ids), int)

        def at_pairs(self, index, times):
            return np.tile([7000.3, 0.0, 0.0], (len(times), 1)), np.zeros((len(times), 3))

    monkeypatch.setattr(predict_module, "predict", fake_predict)
    monkeypatch.setattr(arcs, "result_from_row", lambda r: None)
    passes = [(5 * H, 5.5 * H, 5.6 * H), (6.5 * H, 6.6 * H, 6.7 * H), (8 * H, 8.1 * H, 8.2 * H),
              (9 * H, 9.1 * H, 9.2 * H)]
    post = row(0, prior="manoeuvre", manoeuvres=1) | {"epoch_unix": 6 * H, "fit_start_unix": 4 * H}
    got = R.row_samples(7, post, passes, [8.15 * H], Truth(), "LEO")
    assert [s["k"] for s in got] == [0, 1, 2, 3]
    assert got[0]["d2"] == pytest.approx(9.0) and got[0]["error_m"] == pytest.approx(300.0)
    assert got[1]["d2"] == pytest.approx(9.0) and got[1]["lead_h"] == pytest.approx(0.6)
    assert got[2]["skipped"] and got[3]["skipped"]  # the burn at 8.15 h: before the third pass's end at 8.2 h
    assert not any(s["burn_in_fit"] for s in got) and got[0]["fit_span_h"] == pytest.approx(2.0)
    got = R.row_samples(7, post, passes, [4 * H, 5 * H], Truth(), "LEO")  # at the fit's start: not in it; 5 h is
    assert got[2]["d2"] == pytest.approx(9.0 / 16.0) and got[3]["lead_h"] == pytest.approx(3.1)
    assert all(s["burn_in_fit"] for s in got)
