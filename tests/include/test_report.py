"""sda.report: the run page's pictures, read back from the SVG and checked against hand-computed
values, and the SGP4 separation around a designed encounter against linear relative motion."""

from __future__ import annotations

import datetime as dt
import math
import re

import numpy as np
import pytest

from sda import report


def _attrs(svg: str, tag: str) -> list[dict[str, str]]:
    return [dict(re.findall(r'([\w-]+)="([^"]*)"', m)) for m in re.findall(rf"<{tag} ([^>]*)>", svg)]


def test_stage_bars_are_proportional_to_the_counts():
    svg = report.stage_counts_svg([("normalize", {"records_in": 400, "records_out": 300, "quarantined": 100}),
                                   ("dedup", {"records_in": 300, "records_out": 200, "duplicates": 100, "late": None})])
    bars = {(a["data-stage"], a["data-count"]): float(a["width"]) for a in _attrs(svg, "rect") if "data-stage" in a}
    plot_w = float(re.search(r'data-plot-width="(\d+)"', svg).group(1))
    assert set(bars) == {("normalize", "records_in"), ("normalize", "records_out"), ("normalize", "quarantined"),
                         ("dedup", "records_in"), ("dedup", "records_out"), ("dedup", "duplicates")}  # late: not counted
    assert bars[("normalize", "records_in")] == pytest.approx(plot_w)  # the largest count spans the plot
    assert bars[("normalize", "quarantined")] == pytest.approx(plot_w / 4)  # 100 of 400
    assert bars[("dedup", "records_out")] == pytest.approx(plot_w / 2)  # 200 of 400


def test_separation_plot_marks_the_miss_on_a_log_axis():
    t = np.linspace(-60.0, 60.0, 121)
    sep = np.sqrt(100.0 ** 2 + (1000.0 * t) ** 2)  # 100 m miss, 1 km/s
    svg = report.separation_svg(t, sep, miss_m=100.0, threshold_m=5000.0, title="a × b")
    root = _attrs(svg, "svg")[0]
    lo, hi = int(root["data-log10-min"]), int(root["data-log10-max"])
    assert (lo, hi) == (2, 5)  # 100 m .. 60 km -> decades 10^2 .. 10^5
    top, height = float(root["data-top"]), float(root["data-plot-height"])
    left, width = float(root["data-left"]), float(root["data-plot-width"])
    marker = _attrs(svg, "circle")[0]
    assert float(marker["cx"]) == pytest.approx(left + width / 2, abs=0.06)  # t = 0 is mid-plot
    assert float(marker["cy"]) == pytest.approx(top + height, abs=0.06)  # 100 m is the bottom decade
    threshold = next(a for a in _attrs(svg, "line") if "data-threshold-m" in a)
    # 5 km: log10(5000) = 3.699, i.e. 1.301 decades below the 10^5 top of a 3-decade axis
    assert float(threshold["y1"]) == pytest.approx(top + height * (5 - math.log10(5000)) / 3, abs=0.06)
    points = [tuple(map(float, p.split(","))) for p in _attrs(svg, "polyline")[0]["points"].split()]
    lowest = max(points, key=lambda p: p[1])  # SVG y grows downwards
    assert lowest == pytest.approx((left + width / 2, top + height), abs=0.06)


def test_sample_times_include_tca_and_are_dense_there():
    t = report.sample_times(600.0, 401)
    assert t[0] == -600.0 and t[-1] == 600.0 and 0.0 in t
    assert np.all(np.diff(t) > 0)
    assert np.min(np.abs(t[t != 0])) < 0.05


def test_separation_around_a_designed_encounter():
    from sda.sim.conjunction import design_conjunction

    tca = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.timezone.utc)
    design = design_conjunction(tca, 150.0, seed=3)
    (_, p1, p2), (_, s1, s2) = design["tle"]
    t, sep = report.separation_series((p1, p2), (s1, s2), tca)
    miss, speed = design["achieved_miss_m"], design["rel_speed_ms"]
    assert sep.min() == pytest.approx(miss, abs=1.0)
    assert abs(t[np.argmin(sep)]) < 0.05
    # near TCA the relative motion is straight: |d(t)| = sqrt(miss^2 + (v t)^2)
    near = np.abs(t) < 1.0
    expected = np.sqrt(miss ** 2 + (speed * t[near]) ** 2)
    assert np.allclose(sep[near], expected, rtol=0.02, atol=2.0)
    # minutes away the pair is orbit-scale apart
    assert sep[np.abs(t) == 600.0].min() > 100_000.0
