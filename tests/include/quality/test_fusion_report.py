"""sda.quality.fusion_report: the run page's "Orbit determination" section from hand-made fused-orbit rows,
checked against hand-computed medians and percentiles, and read from a small fused_orbits table."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest

from sda.quality import fusion_report, report

T0 = dt.datetime(2026, 11, 21, 0, 0, tzinfo=dt.timezone.utc)


def _fit(norad_id, regime, status, rms, sigmas=(None, None, None), reason=None, window_start=T0, observations=10,
         line1=None):
    return {"line1": line1, "norad_id": norad_id, "regime": regime, "status": status, "reason": reason, "rms": rms,
            "sigma_r_m": sigmas[0], "sigma_t_m": sigmas[1], "sigma_n_m": sigmas[2], "window_start": window_start,
            "window_end": window_start + dt.timedelta(hours=6), "epoch": window_start + dt.timedelta(hours=5),
            "observations": observations, "outliers": 0, "prior_source": "catalogue"}


NEWEST = [
    _fit(1, "LEO", "converged", 0.9, (3.0, 4.0, 12.0), line1="1 00001U"),  # sigma 13; spans 90 min: a set
    _fit(2, "LEO", "converged", 1.3, (0.0, 6.0, 8.0)),  # sigma 10
    _fit(3, "LEO", "converged", 1.0, (2.0, 3.0, 6.0), line1="1 00003U"),  # sigma 7
    _fit(5, "LEO", "too_few", None, reason="2 observations, 6 needed", observations=2),
    _fit(4, "GEO", "failed", None, reason="singular normal matrix"),
    _fit(6, None, "diverged", 1e6, reason="RMS grew 5 iterations running"),
    _fit(7, "GEO", "converged", 1.1, (50.0, 400.0, 30.0)),
]


def test_per_regime_figures_are_the_hand_computed_ones():
    got = fusion_report.fusion_summary(NEWEST)
    assert [r["regime"] for r in got["regimes"]] == ["LEO", "GEO", "unknown"]  # LEO, MEO, GEO, HEO, then others
    leo = got["regimes"][0]
    assert (leo["objects"], leo["fused"], leo["screened"]) == (4, 3, 2)  # too_few counts, is not fused; 2 sets
    assert leo["rms_median"] == pytest.approx(1.0)  # of 0.9, 1.0, 1.3
    assert leo["rms_p90"] == pytest.approx(1.24)  # 1.0 + 0.8 * (1.3 - 1.0): linear between order statistics
    assert leo["sigma_median_m"] == pytest.approx(10.0)  # of 13, 10, 7
    assert leo["sigma_p90_m"] == pytest.approx(12.4)  # 10 + 0.8 * 3
    assert (leo["sigma_r_median_m"], leo["sigma_t_median_m"], leo["sigma_n_median_m"]) == pytest.approx((2, 4, 8))
    geo = got["regimes"][1]
    assert (geo["objects"], geo["fused"], geo["rms_median"]) == (2, 1, pytest.approx(1.1))
    unknown = got["regimes"][2]
    assert (unknown["fused"], unknown["rms_median"], unknown["sigma_median_m"]) == (0, None, None)
    assert (got["objects"], got["fused"], got["screened"]) == (7, 4, 2)


def test_problems_are_listed_by_status_and_limited():
    got = fusion_report.fusion_summary(NEWEST, limit=2)
    assert got["problems_total"] == 3
    assert [(r["norad_id"], r["status"]) for r in got["problems"]] == [(4, "failed"), (6, "diverged")]


def test_section_shows_the_figures_and_the_failures():
    summary = fusion_report.fusion_summary(NEWEST, limit=2)
    fuse_row = {"stage": "fuse", "metrics_json": json.dumps({"windows": 9, "objects": 7,
                                                               "by_status": {"converged": 8, "failed": 1}})}
    html = fusion_report.fusion_section(summary, fuse_row)
    leo = re.search(r'<tr data-regime="LEO" data-fused="3" data-objects="4">(.*?)</tr>', html).group(1)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", leo)
    assert cells == ["LEO", "3 of 4", "2", "1.00", "1.24", "10", "12", "2", "4", "8"]
    assert 'data-total="3"' in html and "(2 shown)" in html
    assert 'data-norad="4" data-status="failed"' in html and "singular normal matrix" in html
    assert 'data-norad="5"' not in html  # beyond the limit
    assert "fitted 9 windows of 7 objects (converged 8, failed 1)." in html
    fuse_row["metrics_json"] = json.dumps({"windows": 9, "objects": 7, "by_status": {"converged": 9},
                                           "manoeuvres": 2, "reassociated": 1, "reassociation_withdrawn": 0})
    html = fusion_report.fusion_section(summary, fuse_row)
    assert ('(converged 9); it found <span class="manoeuvres">2</span> manoeuvres (gold <code>manoeuvres</code>) '
            "and re-associated 1 held observation.") in html
    assert "decided" not in html  # no re-association figures: no sentence
    fuse_row["metrics_json"] = json.dumps({"windows": 2, "objects": 2, "by_status": {"converged": 2},
                                           "reassociation": {"retested": 1200, "rewritten": 40, "moved": 3,
                                                             "rounds": 1}})
    html = fusion_report.fusion_section(summary, fuse_row)
    assert ('fitted 2 windows of 2 objects (converged 2). Before fitting, it decided <span class="retested">1,200'
            '</span> observations again against the fused orbits of earlier windows (1 round) and moved '
            '<span class="moved">3</span> of them (gold <code>reassociations</code>).</p>') in html


def test_the_page_has_the_section_only_with_fused_orbits(tmp_path):
    base = {"run_id": "r1", "built": "now", "metrics": [], "checks": [], "alerts": []}
    assert "Orbit determination" not in report.render({**base, "fusion": None}, tmp_path, 5000.0)
    page = report.render({**base, "fusion": fusion_report.fusion_summary(NEWEST)}, tmp_path, 5000.0)
    assert "<h2>Orbit determination</h2>" in page and 'data-regime="GEO"' in page
    empty = report.render({**base, "fusion": fusion_report.fusion_summary([])}, tmp_path, 5000.0)
    assert "No orbit has been fitted yet" in empty


def test_all_converged_says_so():
    html = fusion_report.fusion_section(fusion_report.fusion_summary([NEWEST[0]]))
    assert "newest fit converged" in html and "fusion-problems" not in html


def test_the_span_the_screening_needs_is_the_settings():
    summary = fusion_report.fusion_summary([NEWEST[0]])
    assert "spanning 90 minutes or more" in fusion_report.fusion_section(summary)  # the default, 5,400 s
    assert "spanning 120 minutes or more" in fusion_report.fusion_section({**summary, "min_span_s": 7200.0})


def test_newest_window_per_object_from_the_table(spark, settings):
    """Each object's newest window starting before the run's interval end; no table, no section."""
    from sda.lake.schemas import FUSED_ORBITS
    from sda.lake.tables import ensure_tables
    from tests.seed import append_rows

    assert fusion_report.gather_fusion(spark, settings, None) is None
    ensure_tables(spark, settings, ["fused_orbits"])
    six = dt.timedelta(hours=6)

    def row(norad_id, window_start, status, rms):
        values = {f.name: None for f in FUSED_ORBITS.fields}
        values.update({f.name: 0 for f in FUSED_ORBITS.fields if not f.nullable and f.dataType.typeName() == "long"})
        values.update({f.name: 0.0 for f in FUSED_ORBITS.fields if not f.nullable
                       and f.dataType.typeName() == "double"})
        values.update(norad_id=norad_id, window_start=window_start, window_end=window_start + six,
                      epoch=window_start + six, fit_start=window_start, status=status, rms=rms, regime="LEO",
                      sigma_r_m=1.0, sigma_t_m=2.0, sigma_n_m=2.0, source="fused", prior_source="catalogue",
                      obs_digest="d", fused_id=f"{norad_id}/{window_start:%H}", model="m", run_id="fuse-1",
                      reason=None if status == "converged" else "why")
        return tuple(values[f.name] for f in FUSED_ORBITS.fields)

    append_rows(spark, settings, "fused_orbits", [
        row(1, T0, "converged", 1.0), row(1, T0 + six, "not_converged", 4.0),  # newest: not converged
        row(2, T0, "converged", 0.8), row(2, T0 + 2 * six, "failed", None)])  # after the interval: not seen
    got = fusion_report.gather_fusion(spark, settings, T0 + 2 * six)
    assert got["min_span_s"] == settings.fusion_min_span_s
    leo = got["regimes"][0]
    assert (leo["objects"], leo["fused"], leo["rms_median"], leo["sigma_median_m"]) == (2, 1, 0.8, 3.0)
    assert [(p["norad_id"], p["status"], p["reason"]) for p in got["problems"]] == [(1, "not_converged", "why")]
