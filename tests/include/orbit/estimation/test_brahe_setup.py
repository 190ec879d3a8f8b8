"""brahe's process-wide set-up (sda.orbit.estimation.brahe_setup): nothing downloaded (a fresh process with an
empty brahe cache writes nothing there and has the wheel's data), and the cheaper precession-nutation model it
selects (IAU 2000B) against brahe's full IAU 2006/2000A -- the Earth-fixed rotation within a few
milliarcseconds, and a LEO orbit propagated over six hours within centimetres."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from sda.orbit.estimation import dynamics
from sda.orbit.estimation.brahe_setup import brahe

T0 = 1_763_700_000.0  # 2025-11-21


@pytest.fixture
def models():
    """(bh, run(model, f)): ``f()`` evaluated with ``model`` in force; the set-up's model restored after."""
    bh = brahe()

    def run(model, f):
        bh.set_precession_nutation_model(model)
        try:
            return f()
        finally:
            bh.set_precession_nutation_model(bh.PrecessionNutationModel.IAU2000B)

    return bh, run


def test_nothing_is_downloaded(tmp_path):
    """brahe's own initialize_eop() fetches IERS's file into its cache (``$BRAHE_CACHE``) when none is a week
    fresh: the set-up must not, and still have Earth orientation for today and space weather."""
    cache = tmp_path / "brahe-cache"
    code = ("from sda.orbit.estimation.brahe_setup import brahe; bh = brahe(); "
            "print(bh.get_global_eop_mjd_max(), bh.get_global_sw_len())")
    env = {**os.environ, "BRAHE_CACHE": str(cache), "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
           "https_proxy": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    mjd_max, sw_len = out.stdout.split()
    assert float(mjd_max) > 61375.0  # past 2026-12-01: the wheel's predictions cover the suite's dates
    assert int(sw_len) > 1000
    assert not cache.exists() or not any(p.is_file() for p in cache.rglob("*")), list(cache.rglob("*"))


def test_the_setup_selects_iau_2000b():
    bh = brahe()
    assert "2000B" in str(bh.get_precession_nutation_model())


def test_the_earth_fixed_rotation_agrees_with_iau_2006a_to_milliarcseconds(models):
    bh, run = models
    epochs = [dynamics.epoch(T0 + k * 86_400.0 * 37.3) for k in range(10)]  # a year, spread
    full = run(bh.PrecessionNutationModel.IAU2006A, lambda: np.asarray(bh.rotation_gcrf_to_itrf(epochs)))
    fast = run(bh.PrecessionNutationModel.IAU2000B, lambda: np.asarray(bh.rotation_gcrf_to_itrf(epochs)))
    full, fast = full.reshape(-1, 3, 3), fast.reshape(-1, 3, 3)
    # the angle of full^T fast, from its trace
    angle = np.arccos(np.clip((np.einsum("kij,kij->k", full, fast) - 1.0) / 2.0, -1.0, 1.0))
    assert np.degrees(angle).max() * 3.6e6 < 5.0  # milliarcseconds
    assert np.degrees(angle).max() * 3.6e6 > 0.0  # the two models are different computations


def test_a_leo_propagation_moves_by_centimetres_at_most(models):
    bh, run = models
    r = dynamics.RE_M + 450e3
    v = np.sqrt(dynamics.MU_M3_S2 / r)
    x0 = np.array([r, 0.0, 0.0, 0.0, v * np.cos(0.9), v * np.sin(0.9)])
    times = T0 + np.arange(0.0, 6 * 3600.0 + 1.0, 900.0)

    def positions():
        return dynamics.propagate(T0, x0, 0.02, times, variational=False).x[:, :3]

    full = run(bh.PrecessionNutationModel.IAU2006A, positions)
    fast = run(bh.PrecessionNutationModel.IAU2000B, positions)
    assert np.linalg.norm(full - fast, axis=1).max() < 0.05
