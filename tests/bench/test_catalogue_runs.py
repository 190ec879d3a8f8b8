"""bench/catalogue_runs.py's extrapolation and arguments, on hand-made sizes (no simulation, no Spark)."""

from __future__ import annotations

import argparse

import pytest

from bench import catalogue_runs as bench


def size(n: int, stage_s: dict[str, float]) -> dict:
    observing = sum(v for k, v in stage_s.items() if k != "conjunction")
    return {"objects": n, "median_stage_s": stage_s, "per_object_ms": round(1000 * observing / n, 2)}


def test_a_power_law_is_recovered_and_evaluated_at_the_catalogue():
    # t = 0.002 * N^1.5 at 100, 400, 1600: 2, 16, 128 s; at 6400: 0.002 * 512000 = 1024 s
    fit = bench.power_law([100, 400, 1600], [2.0, 16.0, 128.0], 6400)
    assert fit == {"exponent": pytest.approx(1.5, abs=1e-3), "at_catalogue_s": pytest.approx(1024.0, abs=0.1)}
    # a fixed cost stays one: exponent 0, the same seconds
    assert bench.power_law([500, 1000, 2000], [15.0, 15.0, 15.0], 13_407) == {"exponent": 0.0, "at_catalogue_s": 15.0}


def test_the_whole_catalogue_is_the_sum_of_the_stages_extrapolated_and_judged_against_600_s():
    # fuse linear (20 ms an object), conjunction fixed at 40 s: at 13,407 objects 268.1 + 40 = 308.1 s
    per_size = [size(n, {"fuse": 0.02 * n, "conjunction": 40.0}) for n in (500, 1000, 2000)]
    out = bench.extrapolate(per_size)
    assert out["stages"]["fuse"]["power_law"]["exponent"] == pytest.approx(1.0, abs=1e-3)
    assert out["total_s"] == pytest.approx(308.1, abs=0.2) and out["met"] and out["per_object_flat"]
    assert out["per_object_ms"] == [20.0, 20.0, 20.0]
    # a stage growing with the square of the slice: 4x per doubling, 2x per object, so neither flat nor met
    squared = [size(n, {"fuse": 1e-5 * n * n, "conjunction": 40.0}) for n in (500, 1000, 2000)]
    out = bench.extrapolate(squared)
    assert out["stages"]["fuse"]["power_law"]["exponent"] == pytest.approx(2.0, abs=1e-3)
    assert out["total_s"] == pytest.approx(1e-5 * 13_407 ** 2 + 40, rel=1e-3)
    assert not out["met"] and not out["per_object_flat"]


def test_a_fixed_cost_plus_one_per_object_is_extrapolated_by_the_straight_line():
    # 15 s + 30 ms an object at 250, 500, 1000 (22.5, 30, 45 s): the power law through them (p ~ 0.5) reads
    # about 160 s at 13,407; the line 15 + 0.03 * 13,407 = 417.2 s, and the larger is taken
    per_size = [size(n, {"fuse": 15 + 0.03 * n}) for n in (250, 500, 1000)]
    fuse = bench.extrapolate(per_size)["stages"]["fuse"]
    assert fuse["linear"] == {"fixed_s": pytest.approx(15.0), "per_object_ms": pytest.approx(30.0),
                              "at_catalogue_s": pytest.approx(417.2, abs=0.1)}
    assert fuse["power_law"]["at_catalogue_s"] < 200 and fuse["at_catalogue_s"] == fuse["linear"]["at_catalogue_s"]


@pytest.mark.parametrize("text, why", [
    ("500,1000", "at least three"), ("500,500,1000", "at least three"), ("10,500,1000", "at least three"),
    ("500,1000,20000", "at least three"), ("500,a,1000", "comma-separated")])
def test_bad_sizes_are_refused_saying_what_is_wrong(text, why):
    with pytest.raises(argparse.ArgumentTypeError, match=why):
        bench.sizes(text)
    assert bench.sizes("2000, 500,1000") == [500, 1000, 2000]


def test_an_earlier_size_is_reused_only_for_the_same_seed_warm_up_and_span(tmp_path):
    path = tmp_path / "500.json"
    path.write_text('{"catalogue": "reference", "seed": 13, "warm_hours": 6.0, "hours": 8.0, "objects": 500}')
    assert bench.earlier(path, 13, 6.0, 8.0)["objects"] == 500
    assert bench.earlier(path, 14, 6.0, 8.0) is None  # another seed
    assert bench.earlier(path, 13, 6.0, 9.0) is None  # another span
    assert bench.earlier(tmp_path / "none.json", 13, 6.0, 8.0) is None
    path.write_text('{"catalogue": "generated", "seed": 13, "warm_hours": 6.0, "hours": 8.0}')
    assert bench.earlier(path, 13, 6.0, 8.0) is None  # a synthetic catalogue's run
