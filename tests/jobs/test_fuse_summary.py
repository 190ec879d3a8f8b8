"""jobs.fuse.summary: the run's figures from the rows it wrote (hand-computed expectations)."""

from __future__ import annotations

import math

import pytest

from jobs.fuse import summary


def _row(norad, regime, status, obs, rms, sig):
    return {"norad_id": norad, "regime": regime, "status": status, "observations": obs, "rms": rms,
            "sigma_r_m": sig[0], "sigma_t_m": sig[1], "sigma_n_m": sig[2]}


def test_figures_per_regime_and_status():
    rows = [_row(1, "LEO", "converged", 10, 0.9, (3.0, 4.0, 0.0)),   # sigma 5
            _row(1, "LEO", "converged", 20, 1.3, (6.0, 8.0, 0.0)),   # sigma 10, the same object's next window
            _row(2, "LEO", "converged", 5, 1.0, (0.0, 0.0, 20.0)),   # sigma 20
            _row(3, None, "failed", 4, math.nan, (None, None, None))]
    got = summary(rows)
    assert (got["windows"], got["objects"], got["observations"], got["converged"]) == (4, 3, 39, 3)
    assert got["by_status"] == {"converged": 3, "failed": 1}
    leo = got["regimes"]["LEO"]["converged"]
    assert (leo["windows"], leo["objects"]) == (3, 2)
    assert leo["rms_median"] == pytest.approx(1.0) and leo["sigma_median_m"] == pytest.approx(10.0)
    failed = got["regimes"]["unknown"]["failed"]
    assert (failed["windows"], failed["objects"], failed["rms_median"], failed["sigma_median_m"]) == (1, 1, None, None)


def test_nothing_written():
    assert summary([]) == {"observations": 0, "windows": 0, "objects": 0, "by_status": {}, "converged": 0,
                           "regimes": {}}
