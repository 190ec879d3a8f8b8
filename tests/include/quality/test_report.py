"""sda.quality.report: the run page's pictures, read back from the SVG and checked against hand-computed
values, and the SGP4 separation around a designed encounter against linear relative motion."""

from __future__ import annotations

import datetime as dt
import json
import math
import re

import numpy as np
import pytest

from sda.quality import report


def _attrs(svg: str, tag: str) -> list[dict[str, str]]:
    return [dict(re.findall(r'([\w-]+)="([^"]*)"', m)) for m in re.findall(rf"<{tag} ([^>]*)>", svg)]


def test_stage_bars_are_proportional_to_the_counts():
    svg = report.stage_counts_svg([("normalize", {"records_in": 400, "records_out": 300, "quarantined": 100}),
                                   ("dedup", {"records_in": 300, "records_out": 200, "duplicates": 100, "late": None})])
    bars = {(a["data-stage"], a["data-count"]): float(a["width"]) for a in _attrs(svg, "rect") if "data-stage" in a}
    plot_w = float(re.search(r'data-plot-width="(\d+)"', svg).group(1))
    assert set(bars) == {("normalize", "records_in"), ("normalize", "records_out"), ("normalize", "quarantined"),
                         ("dedup", "records_in"), ("dedup", "records_out"),
                         ("dedup", "duplicates")}  # late: not counted
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


def test_calibration_from_the_tables(spark, settings):
    """The run's correlated rows, regimes from the newest catalogue epoch: hand-computed ratios."""
    import datetime as dt

    from sda.lake import schemas
    from sda.lake.tables import TABLES, ensure_tables
    from sda.quality.report import _calibration, _calibration_section
    from tests.seed import append_rows, catalog_row

    ensure_tables(spark, settings)
    t0 = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)

    def correlated(obs_id, run_id, norad_id, d2, residuals):
        row = {f.name: None for f in schemas.CORRELATED.fields}
        row.update(obs_id=obs_id, sensor_id="S", sensor_kind="radar", event_time=t0, event_date=t0.date(),
                   ingest_time=t0, ingest_batch=1, bronze_id=obs_id, source_file="f", run_id=run_id, copies=1,
                   norad_id=norad_id,
                   residual_m=1.0, candidates=1, ambiguous=False, correlate_run_id=run_id, gate_d2=d2, **residuals)
        return tuple(row[f.name] for f in schemas.CORRELATED.fields)

    radar = dict(residual_range_m=1.0, residual_az_rad=0.0, residual_el_rad=0.0, residual_range_rate_ms=0.5)
    optical = dict(residual_ra_rad=0.0, residual_dec_rad=0.0)
    rows = [correlated("a", "r1", 1, 2.0, radar), correlated("b", "r1", 1, 6.0, radar),  # LEO: (2 + 6) / 8
            correlated("c", "r1", 2, 8.0, optical),  # GEO: 8 / 2
            correlated("d", "r0", 2, 100.0, optical)]  # another run's
    append_rows(spark, settings, "correlated", rows)

    def catalog(norad_id, epoch, perigee, apogee):
        return catalog_row(norad_id, epoch, ("1", "2"), perigee, apogee, load_time=t0, name="X", run_id="r1")

    cat = [catalog(1, t0 - dt.timedelta(days=2), 35780.0, 35790.0), catalog(1, t0 - dt.timedelta(days=1), 500.0, 520.0),
           catalog(2, t0 - dt.timedelta(days=1), 35780.0, 35790.0)]
    append_rows(spark, settings, "catalog", cat)

    def table_rows(table, where):
        return [r.asDict() for r in TABLES[table].read(spark, settings).where(where).collect()]

    got = {r["regime"]: r for r in _calibration(spark, settings, "r1", table_rows)}
    assert got["LEO"]["observations"] == 2 and got["LEO"]["ratio"] == pytest.approx(1.0)
    assert got["GEO"]["observations"] == 1 and got["GEO"]["ratio"] == pytest.approx(2.0)
    assert "too tight</td>" in _calibration_section(list(got.values()))
    assert _calibration(spark, settings, "nobody", table_rows) == []


def test_each_alert_says_which_orbit_each_object_was_screened_on(tmp_path):
    def alert(alert_id, p_src, s_src):
        return {"alert_id": alert_id, "level": "RED", "primary_id": 11, "secondary_id": 22, "status": "open",
                "version": 1, "tca": "2026-11-28T03:00:00Z", "miss_m": 150.0, "rel_speed_ms": 14000.0, "pc": 1e-4,
                "p_cov_source": p_src, "s_cov_source": s_src, "series": None}

    base = {"run_id": "r", "interval": None, "metrics": [], "checks": [], "calibration": None, "fusion": None,
            "built": "now", "alerts": [alert("a", "fused/LEO/f1", "tle/LEO"),
                                       alert("b", "observed/LEO", "fused/LEO/f2"), alert("c", "tle/GEO", "tle/GEO"),
                                       alert("d", "fused/LEO/f3", "fused/MEO/f4")]}
    page = report.render(base, tmp_path, 5000.0)
    marked = dict(re.findall(r'data-alert="(\w)" data-orbits="([\w/]+)"', page))
    assert marked == {"a": "fused/catalogue", "b": "catalogue/fused", "c": "catalogue/catalogue", "d": "fused/fused"}
    assert "orbits screened: 11 fused, 22 catalogue" in page


def test_ingest_says_which_files_it_refused_unread_or_read_leniently(tmp_path):
    ingest = {"stage": "ingest", "mode": "incremental", "records_in": 3, "records_out": 1, "quarantined": 2,
              "duplicates": 0, "late": None, "seconds": 1.0, "conserved": True,
              "metrics_json": '{"files_refused_unread": 2, "lenient_reads": {"tdm/a.kvn": "tabs read as blanks on '
                              'line 2 (KVN allows blanks only)"}}'}
    base = {"run_id": "r", "interval": None, "metrics": [ingest], "checks": [], "calibration": None, "fusion": None,
            "built": "now", "alerts": []}
    page = report.render(base, tmp_path, 5000.0)
    assert 'data-refused-unread="2"' in page
    assert re.findall(r'<li data-lenient="([^"]+)"><code>[^<]+</code>: ([^<]+)</li>', page) == [
        ("tdm/a.kvn", "tabs read as blanks on line 2 (KVN allows blanks only)")]
    quiet = report.render({**base, "metrics": [{**ingest, "metrics_json": "{}"}]}, tmp_path, 5000.0)
    assert "data-refused-unread" not in quiet and "data-lenient" not in quiet


def test_ingest_says_what_space_weather_the_run_received(tmp_path):
    sw = {"files": 2, "newest_issue": "2026-11-21T09:00:00Z", "interval": ["2026-11-21T06:00:00Z",
                                                                          "2026-11-21T12:00:00Z"],
          "observed_intervals": 1, "max_observed_kp": 22 / 3, "storm_observed": True, "max_forecast_kp": 4.0}
    ingest = {"stage": "ingest", "mode": "incremental", "records_in": 28, "records_out": 28, "quarantined": 0,
              "duplicates": 0, "late": None, "seconds": 1.0, "conserved": True}
    base = {"run_id": "r", "interval": None, "checks": [], "calibration": None, "fusion": None, "built": "now",
            "alerts": []}

    def page(summary):
        return report.render({**base, "metrics": [{**ingest, "metrics_json": json.dumps({"space_weather": summary})}]},
                             tmp_path, 5000.0)

    storm = page(sw)
    assert re.findall(r'data-space-weather="(\d+)" data-max-observed-kp="([^"]*)" data-storm="(\w+)"', storm) == [
        ("2", str(22 / 3), "true")]
    assert "newest issued 2026-11-21T09:00:00Z" in storm
    assert "1 3-hour interval(s) observed, Kp at most 7+ (7.33)" in storm and "a geomagnetic storm" in storm
    assert "forecast Kp at most 4o (4.00)" in storm
    quiet = page({**sw, "observed_intervals": 0, "max_observed_kp": None, "storm_observed": False})
    assert 'data-storm="false"' in quiet and "no 3-hour interval of it observed yet" in quiet
    assert "geomagnetic storm" not in quiet
    assert "data-space-weather" not in page(None)


def test_each_alert_says_which_rules_fired(tmp_path):
    def alert(alert_id, rule):
        return {"alert_id": alert_id, "level": "yellow", "primary_id": 11, "secondary_id": 22, "status": "new",
                "version": 1, "tca": "2026-11-28T03:00:00Z", "miss_m": 1500.0, "rel_speed_ms": 14000.0, "pc": 1e-9,
                "p_cov_source": "tle/LEO", "s_cov_source": "tle/LEO", "series": None, "alert_rule": rule}

    base = {"run_id": "r", "interval": None, "metrics": [], "checks": [], "calibration": None, "fusion": None,
            "built": "now", "alerts": [alert("a", "miss_probability"), alert("b", None)]}
    page = report.render(base, tmp_path, 5000.0)
    assert "alert rules miss_probability ·" in page and "alert rules none ·" in page
