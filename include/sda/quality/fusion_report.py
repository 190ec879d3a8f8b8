"""The run report's "Orbit determination" section: how the fused orbits (gold ``fused_orbits``) stand.

Each object's **newest** window (largest ``window_start``, among the windows starting before the run's
data interval ended) says where the object is:

- per orbit regime, the objects and how many of them are **fused** (newest fit ``converged``), the
  weighted residual RMS of those fits (median and 90th percentile; near 1 when the sensors' noise model
  holds) and the size of their covariance at epoch: median and p90 of
  ``sqrt(sigma_r^2 + sigma_t^2 + sigma_n^2)`` and the median 1-sigma radial / along-track / cross-track;
- the objects whose newest fit failed, diverged, did not converge or had too few observations, with
  the fit's status and reason (the first :data:`PROBLEM_ROWS`, and how many in all): the screening and
  the assessment use an older converged fit of theirs or the catalogue's element set.

The fused orbits are read as they stand when the page is built (a window refitted since the run shows
its new fit). A lakehouse without the table gives no section. The fuse stage's own figures for the
run (windows fitted, by status) come from ``ops.run_metrics``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sda.quality.charts import escape as _e

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings

REGIME_ORDER = ("LEO", "MEO", "GEO", "HEO")
PROBLEM_STATUSES = ("failed", "diverged", "not_converged", "too_few")  # in the order the table lists them
PROBLEM_ROWS = 25
RMS_GOOD = (0.5, 2.0)  # a median weighted RMS outside this is marked: the noise model or the fits are off
COLUMNS = ("norad_id", "window_start", "window_end", "epoch", "status", "reason", "regime", "rms", "observations",
           "outliers", "sigma_r_m", "sigma_t_m", "sigma_n_m", "prior_source", "line1")


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100, linear between order statistics) of the finite values, None if none."""
    finite = [float(v) for v in values if v is not None and math.isfinite(v)]
    return float(np.percentile(finite, q)) if finite else None


def _sigma(row: dict[str, Any]) -> float | None:
    parts = [row.get(k) for k in ("sigma_r_m", "sigma_t_m", "sigma_n_m")]
    if any(p is None or not math.isfinite(p) for p in parts):
        return None
    return math.sqrt(sum(p * p for p in parts))


def _regime_row(regime: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    fused = [r for r in rows if r["status"] == "converged"]
    sizes, rms = [_sigma(r) for r in fused], [r["rms"] for r in fused]
    # the screening uses a converged fit only with its element set, which the stage fits only over
    # settings.fusion_min_span_s or more: a shorter one is fused but screened on an older fit or the catalogue
    used = sum(1 for r in fused if r.get("line1"))
    return {"regime": regime, "objects": len(rows), "fused": len(fused), "screened": used,
            "rms_median": percentile(rms, 50), "rms_p90": percentile(rms, 90),
            "sigma_median_m": percentile(sizes, 50), "sigma_p90_m": percentile(sizes, 90),
            **{f"sigma_{c}_median_m": percentile([r[f"sigma_{c}_m"] for r in fused], 50) for c in "rtn"}}


def fusion_summary(newest: Sequence[dict[str, Any]], limit: int = PROBLEM_ROWS) -> dict[str, Any]:
    """From each object's newest fused-orbit row: ``regimes`` (per regime, :func:`_regime_row`), ``problems``
    (the first ``limit`` objects whose newest fit is not converged, by status then norad_id) and
    ``problems_total``. A row without a regime (the fit has no finite state) counts as ``unknown``."""
    by_regime: dict[str, list[dict[str, Any]]] = {}
    for r in newest:
        by_regime.setdefault(r.get("regime") or "unknown", []).append(r)
    order = {name: i for i, name in enumerate(REGIME_ORDER)}
    regimes = [_regime_row(name, rows) for name, rows in
               sorted(by_regime.items(), key=lambda kv: (order.get(kv[0], 99), kv[0]))]
    rank = {s: i for i, s in enumerate(PROBLEM_STATUSES)}
    problems = sorted((r for r in newest if r["status"] != "converged"),
                      key=lambda r: (rank.get(r["status"], 99), r["status"], int(r["norad_id"])))
    return {"regimes": regimes, "problems": problems[:limit], "problems_total": len(problems),
            "objects": len(newest), "fused": sum(r["fused"] for r in regimes),
            "screened": sum(r["screened"] for r in regimes)}


def gather_fusion(spark: "SparkSession", settings: "Settings", before: dt.datetime | None) -> dict[str, Any] | None:
    """:func:`fusion_summary` of each object's newest window starting before ``before`` (None: any); None
    when the lakehouse has no ``fused_orbits`` table."""
    from pyspark.sql import functions as F

    from sda.lake.tables import TABLES, table_exists

    if not table_exists("fused_orbits", settings):
        return None
    table = TABLES["fused_orbits"].read(spark, settings)
    if before is not None:
        table = table.where(F.col("window_start") < F.lit(before))
    newest = (table.groupBy("norad_id").agg(F.max_by(F.struct(*COLUMNS[1:]), "window_start").alias("f"))
              .select("norad_id", "f.*").collect())
    return {**fusion_summary([r.asDict() for r in newest]), "min_span_s": settings.fusion_min_span_s}


def _num(value: float | None, fmt: str) -> str:
    return "" if value is None else format(value, fmt)


def _run_line(fuse_metrics: dict[str, Any] | None) -> str:
    """What the run's fuse stage did, from its ``ops.run_metrics`` row (empty when it did not run)."""
    if not fuse_metrics:
        return ""
    figures = json.loads(fuse_metrics.get("metrics_json") or "{}")
    statuses = ", ".join(f"{s} {n:,}" for s, n in sorted((figures.get("by_status") or {}).items()))
    found = figures.get("manoeuvres") or 0
    moved, back = figures.get("reassociated") or 0, figures.get("reassociation_withdrawn") or 0
    extra = (f'; it found <span class="manoeuvres">{found:,}</span> manoeuvre{"s" if found != 1 else ""} '
             f"(gold <code>manoeuvres</code>) and re-associated {moved:,} held observation{'s' if moved != 1 else ''}"
             + (f" ({back:,} moved back)" if back else "")) if found or moved or back else ""
    again = figures.get("reassociation") or {}
    decided = (f' Before fitting, it decided <span class="retested">{again["retested"]:,}</span> observations again '
               f'against the fused orbits of earlier windows ({again.get("rounds", 0):,} round'
               f'{"s" if again.get("rounds", 0) != 1 else ""}) and moved <span class="moved">{again.get("moved", 0):,}'
               "</span> of them (gold <code>reassociations</code>).") if again.get("retested") else ""
    return (f'<p class="fuse-run">This run\'s fuse stage fitted {figures.get("windows", 0):,} windows of '
            f'{figures.get("objects", 0):,} objects' + (f" ({_e(statuses)})" if statuses else "") + extra + "."
            + decided + "</p>")


def _regimes_table(regimes: list[dict[str, Any]]) -> str:
    body = []
    for r in regimes:
        rms = r["rms_median"]
        cls = "num" if rms is None else ("num ok" if RMS_GOOD[0] <= rms <= RMS_GOOD[1] else "num warn")
        body.append(f'<tr data-regime="{_e(r["regime"])}" data-fused="{r["fused"]}" data-objects="{r["objects"]}">'
                    f'<td>{_e(r["regime"])}</td><td class="num">{r["fused"]:,} of {r["objects"]:,}</td>'
                    f'<td class="num">{r["screened"]:,}</td>'
                    f'<td class="{cls}">{_num(rms, ".2f")}</td><td class="num">{_num(r["rms_p90"], ".2f")}</td>'
                    f'<td class="num">{_num(r["sigma_median_m"], ",.0f")}</td>'
                    f'<td class="num">{_num(r["sigma_p90_m"], ",.0f")}</td>'
                    + "".join(f'<td class="num">{_num(r[f"sigma_{c}_median_m"], ",.0f")}</td>' for c in "rtn")
                    + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in (
        "regime", "fused objects", "with a screening set", "RMS median", "RMS p90", "σ median (m)", "σ p90 (m)",
        "σR median", "σT median", "σN median"))
    return f'<table class="fusion"><tr>{head}</tr>{"".join(body)}</table>'


def _problems_table(problems: list[dict[str, Any]], total: int) -> str:
    if not total:
        return '<p class="ok">Every object\'s newest fit converged.</p>'
    body = "".join(
        f'<tr data-norad="{int(r["norad_id"])}" data-status="{_e(r["status"])}"><td>{int(r["norad_id"])}</td>'
        f'<td>{_e(r.get("regime") or "unknown")}</td><td>{_e(r["window_start"])}</td>'
        f'<td class="{"bad" if r["status"] in ("failed", "diverged") else "warn"}">{_e(r["status"])}</td>'
        f'<td>{_e(r.get("reason") or "")}</td><td class="num">{r.get("observations") or 0:,}</td>'
        f'<td class="num">{_num(r.get("rms"), ".2f")}</td></tr>' for r in problems)
    more = f" ({len(problems)} shown)" if total > len(problems) else ""
    return (f'<p class="fusion-problems" data-total="{total}">{total:,} objects whose newest fit did not converge'
            f"{more}: the screening uses an older converged fit of theirs or the catalogue's element set.</p>"
            '<table class="fusion-problems"><tr><th>object</th><th>regime</th><th>window</th><th>status</th>'
            f'<th>reason</th><th>observations</th><th>RMS</th></tr>{body}</table>')


def fusion_section(summary: dict[str, Any], fuse_metrics: dict[str, Any] | None = None) -> str:
    """The section's HTML (:func:`fusion_summary` and the run's fuse row of ``ops.run_metrics``); the span
    from which the screening uses a fit is ``summary["min_span_s"]`` (``settings.fusion_min_span_s``)."""
    from sda.config.settings import Settings

    span_min = summary.get("min_span_s", Settings.fusion_min_span_s) / 60.0
    intro = ("<p>Each object's newest event-time window of gold <code>fused_orbits</code>: fused when its fit "
             f"converged. A fused fit spanning {span_min:g} minutes or more carries the element set the screening "
             "propagates "
             "(column 3); for a shorter one the screening takes the object's older fused fit or the catalogue's "
             "element set. RMS is the weighted residual RMS (near 1 when the sensors' noise model holds); σ is "
             "sqrt(σR² + σT² + σN²), the 1-sigma position uncertainty at the fit's epoch.</p>")
    if not summary["objects"]:
        return _run_line(fuse_metrics) + '<p class="muted">No orbit has been fitted yet.</p>'
    return (_run_line(fuse_metrics) + intro + _regimes_table(summary["regimes"])
            + _problems_table(summary["problems"], summary["problems_total"]))
