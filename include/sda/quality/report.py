"""Run reports: one HTML page per pipeline run, drawn rather than written out.

    <lakehouse parent>/reports/runs/<run_id>/index.html     (and runs/index.html, newest first)

The page is built from the tables, so it can be rebuilt at any time and a retry rebuilds the same
page: the job ``jobs/quality.py`` writes it after each gate (a failed gate included, so the page
says why the run stopped). It shows

- **counts per stage**: a bar chart of records in / out / quarantined / duplicates / late from
  ``ops.run_metrics``, with each stage's duration, watermark and upstream lag below it, and the landed
  files ingest refused whole before reading them or read leniently (from its ``metrics_json``:
  ``files_refused_unread``, ``lenient_reads``; their quarantine rows say why), and the space weather it
  received (``space_weather``: the CSSI files taken, the newest issue, over the run's data interval the
  largest observed Kp -- a geomagnetic storm from Kp 5 -- and the largest forecast one);
- **data quality**: every check of ``ops.data_quality`` for the run, by layer and table, with its
  severity and outcome, and a link to the table's Great Expectations validation page (Data Docs);
- **correlation calibration**: per orbit regime, the RMS of the correlated observations' residuals in
  units of their predicted sigma (``sqrt(sum gate_d2 / sum components)`` over ``gold.correlated`` of
  the run: ``gate_d2`` is the residual's Mahalanobis distance under the gate's covariance, the
  uncertainty model's prediction plus the sensor's noise, so the ratio is observed / predicted). Near
  1 the model fits; above it the model is too tight (correct observations will fall outside the gate),
  below it too loose (the gate lets more wrong candidates in than it needs to);
- **orbit determination** (where the lakehouse has gold ``fused_orbits``): per regime, the objects whose
  newest fit converged, their weighted residual RMS and covariance sizes, and the objects whose newest
  fit did not converge, with why (:mod:`sda.quality.fusion_report`);
- **sensor calibration**: each sensor's newest estimated biases, bias +- sigma and the observations and objects
  behind them (gold ``sensor_calibrations``, :mod:`sda.quality.sensor_calibration_report`);
- **alerts**: for every alert version the run emitted (``gold.alert_events``), the pair's separation
  over time around TCA, propagated with SGP4 from the element sets the screening used (the newest
  loaded before the run's screening finished, as ``sda trace`` finds them), on a log scale so the
  close approach and the orbit-scale separation show in one picture, and which orbit each object was
  screened on: ``fused`` (its fused orbit, gold ``fused_orbits``) or ``catalogue`` (its element set).

The charts are SVG written by hand (:mod:`sda.quality.charts`); every mark carries ``data-*``
attributes with the value it draws, so a test or a script can read the picture back.
The Airflow plugin ``plugins/sda_reports.py`` serves this directory behind Airflow's login, and the
quality tasks' "Run report" extra link points at a run's page.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence
from urllib.parse import quote

import numpy as np

from sda.pipeline.lineage.orbit import orbit_kind
from sda.pipeline.space_weather import kp_symbol
from sda.quality import sensor_calibration_report as sensor_calibration
from sda.quality.charts import COUNTS, separation_svg, stage_counts_svg
from sda.quality.charts import escape as _e
from sda.quality.fusion_report import fusion_section, gather_fusion

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import SparkSession

    from sda.config.settings import Settings

LEVEL_COLOURS = {"red": "#d62728", "yellow": "#e6b800", "none": "#7f7f7f"}
HALF_WINDOW_S = 600.0  # separation plots span TCA +- 10 minutes
SAMPLES = 401


def reports_root(settings: "Settings") -> Path:
    return settings.lakehouse.parent / "reports"


def run_dir(settings: "Settings", run_id: str) -> Path:
    return reports_root(settings) / "runs" / run_id


def run_url_path(run_id: str) -> str:
    """The page's path under the reports root, URL-quoted (run ids carry ':' and '+')."""
    return f"runs/{quote(run_id, safe='')}/index.html"


# --- the separation around TCA --------------------------------------------------------------------

def sample_times(half_window_s: float = HALF_WINDOW_S, n: int = SAMPLES) -> np.ndarray:
    """Seconds from TCA, dense near it (quadratic spacing, t = 0 included): a 10 km/s encounter
    is resolved to metres near TCA and the plot still spans minutes."""
    u = np.linspace(-1.0, 1.0, n if n % 2 else n + 1)
    return np.sign(u) * half_window_s * u * u


def separation_series(primary_lines: tuple[str, str], secondary_lines: tuple[str, str], tca: dt.datetime,
                      t_s: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """SGP4 separation (m) of two element sets at ``tca + t_s`` (NaN where either fails to propagate)."""
    from sgp4.api import WGS72, Satrec

    from sda.orbit import frames

    t = sample_times() if t_s is None else np.asarray(t_s, float)
    unix = tca.timestamp() + t
    jd_full = frames.UNIX_EPOCH_JD + unix / 86400.0
    jd = np.floor(jd_full - 0.5) + 0.5
    fr = jd_full - jd
    positions = []
    for line1, line2 in (primary_lines, secondary_lines):
        sat = Satrec.twoline2rv(line1, line2, WGS72)
        err, r, _ = sat.sgp4_array(jd, fr)
        r = np.asarray(r, float)
        r[np.asarray(err) != 0] = np.nan
        positions.append(r)
    return t, np.linalg.norm(positions[0] - positions[1], axis=1) * 1000.0


# --- the page -------------------------------------------------------------------------------------

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:880px;color:#222}
h1{font-size:20px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0} td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:left}
.num{text-align:right;font-variant-numeric:tabular-nums} .muted{color:#777}
.ok{color:#2a7d2a} .bad{color:#c62828;font-weight:600} .warn{color:#b26a00}
.badge{display:inline-block;padding:0 6px;border-radius:8px;color:#fff;font-size:12px}
svg .grid{stroke:#e4e4e4} svg .threshold{stroke:#c62828;stroke-dasharray:5 4}
svg .separation{stroke:#1f77b4;stroke-width:1.6} svg .tca{fill:#d62728}
svg text{font:11px system-ui,sans-serif;fill:#444} svg .stage{font-weight:600} svg .axis{font-weight:600}
"""


def _page(title: str, body: str) -> str:
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{STYLE}</style></head><body>{body}</body></html>")


def _relative_link(target: Path, page_dir: Path) -> str:
    rel = os.path.relpath(target, page_dir)
    return "/".join(quote(part, safe="") for part in rel.split(os.sep))


def _docs_path(url: str | None) -> Path | None:
    from urllib.parse import unquote

    return Path(unquote(url[len("file://"):])) if url and url.startswith("file://") else None


def _metrics_section(metrics: list[dict[str, Any]]) -> str:
    if not metrics:
        return '<p class="muted">No stage of this run has recorded its figures yet.</p>'
    chart = stage_counts_svg([(m["stage"], {k: m.get(k) for k in COUNTS}) for m in metrics])
    rows = []
    for m in metrics:
        lag = ("" if m.get("lag_versions") is None
               else f'{m["lag_versions"]} versions, {m.get("lag_seconds") or 0:.0f} s')
        rows.append(f'<tr data-stage="{_e(m["stage"])}"><td>{_e(m["stage"])}</td>'
                    f'<td>{_e(m.get("mode") or "incremental")}</td>'
                    + "".join(f'<td class="num">{"" if m.get(k) is None else f"{m[k]:,}"}</td>' for k in COUNTS)
                    + f'<td class="num">{m["seconds"]:.1f}</td><td>{_e(m.get("watermark") or "")}</td><td>{lag}</td>'
                    + f'<td>{"" if m.get("conserved") is None else ("✓" if m["conserved"] else "✗ broken")}</td></tr>')
    head = "".join(f"<th>{h}</th>" for h in ("stage", "mode", "in", "out", "quarantined", "duplicates", "late",
                                              "seconds", "watermark", "upstream lag", "in = out + …"))
    return f'{chart}<table class="metrics"><tr>{head}</tr>{"".join(rows)}</table>' + _landing_notes(metrics)


def _landing_notes(metrics: list[dict[str, Any]]) -> str:
    """What ingest said of the landed files beyond the counts: refused whole before reading, read leniently."""
    ingest = next((m for m in metrics if m["stage"] == "ingest"), None)
    figures = json.loads(ingest.get("metrics_json") or "{}") if ingest else {}
    refused, lenient = figures.get("files_refused_unread") or 0, figures.get("lenient_reads") or {}
    out = ""
    if refused:
        out += (f'<p data-refused-unread="{refused}">{refused} landed file(s) refused whole before reading (a symlink '
                "leading out of the landing zone, not a regular file): one row each in <code>ops.quarantine</code>, "
                "with why.</p>")
    if lenient:
        items = "".join(f'<li data-lenient="{_e(path)}"><code>{_e(path)}</code>: {_e(what)}</li>'
                        for path, what in sorted(lenient.items()))
        out += f"<p>{len(lenient)} file(s) read leniently, not as their standard writes them:</p><ul>{items}</ul>"
    return out + _space_weather_note(figures.get("space_weather"))


def _space_weather_note(sw: dict[str, Any] | None) -> str:
    """The space weather ingest received (:func:`sda.pipeline.space_weather.run_summary`), if any."""
    if not sw:
        return ""
    kp, forecast = sw.get("max_observed_kp"), sw.get("max_forecast_kp")
    start, end = sw.get("interval") or ("?", "?")
    observed = ("no 3-hour interval of it observed yet" if kp is None else
                f'{sw.get("observed_intervals")} 3-hour interval(s) observed, Kp at most {kp_symbol(kp)} ({kp:.2f})'
                + (' — <span class="bad">a geomagnetic storm (Kp ≥ 5)</span>' if sw.get("storm_observed") else ""))
    ahead = "" if forecast is None else f"; forecast Kp at most {kp_symbol(forecast)} ({forecast:.2f})"
    storm = "true" if sw.get("storm_observed") else "false"
    return (f'<p data-space-weather="{sw.get("files")}" data-max-observed-kp="{"" if kp is None else kp}" '
            f'data-storm="{storm}">Space weather: {sw.get("files")} CSSI file(s) taken, newest issued '
            f'{_e(sw.get("newest_issue") or "(none readable)")}. Over the run\'s interval {_e(start)} – {_e(end)}: '
            f"{observed}{ahead}.</p>")


def _quality_section(checks: list[dict[str, Any]], page_dir: Path) -> str:
    if not checks:
        return '<p class="muted">No data-quality gate has run for this run yet.</p>'
    out = []
    by_table: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in checks:
        by_table.setdefault((c["layer"], c["table"]), []).append(c)
    order = {"bronze": 0, "silver": 1, "gold": 2}
    for (layer, table), rows in sorted(by_table.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])):
        failed = [r for r in rows if not r["success"]]
        gate = not any(r["severity"] == "fail" for r in failed)
        docs = _docs_path(rows[0].get("data_docs_url"))
        link = (f' · <a href="{_relative_link(docs, page_dir)}" class="data-docs">Great Expectations validation</a>'
                if docs else "")
        status = (f'<span class="ok">all {len(rows)} checks passed</span>' if not failed else
                  f'<span class="{"warn" if gate else "bad"}">{len(failed)} of {len(rows)} checks failed'
                  f'{"" if gate else " — gate FAILED"}</span>')
        out.append(f'<h3 data-table="{_e(table)}">{_e(layer)}.{_e(table)}: {status}{link}</h3>')
        body = []
        for r in rows:
            cls = "ok" if r["success"] else ("bad" if r["severity"] == "fail" else "warn")
            unexpected = ("" if r.get("unexpected_count") is None
                          else f'{r["unexpected_count"]:,} of {r.get("element_count") or 0:,}')
            body.append(f'<tr><td>{_e(r["expectation"])}</td><td>{_e(r.get("column") or "")}</td>'
                        f'<td>{_e(r["severity"])}</td>'
                        f'<td class="{cls}">{"pass" if r["success"] else "FAIL"}</td><td class="num">{unexpected}</td>'
                        f'<td>{_e((r.get("observed") or "")[:160])}</td></tr>')
        out.append('<table class="checks"><tr><th>check</th><th>column</th><th>severity</th><th>result</th>'
                   f'<th>unexpected</th><th>observed</th></tr>{"".join(body)}</table>')
    return "".join(out)


def _alerts_section(alerts: list[dict[str, Any]], threshold_m: float) -> str:
    if not alerts:
        return '<p class="muted">This run emitted no alert.</p>'
    out = []
    for a in alerts:
        colour = LEVEL_COLOURS.get(a["level"], "#555")
        names = f'{_e(a.get("primary_name") or a["primary_id"])} × {_e(a.get("secondary_name") or a["secondary_id"])}'
        pc = "n/a" if a.get("pc") is None else f'{a["pc"]:.2e}'
        orbits = [orbit_kind(a.get(f"{r}_cov_source")) for r in ("p", "s")]
        out.append(f'<h3 data-alert="{_e(a["alert_id"])}" data-orbits="{orbits[0]}/{orbits[1]}">'
                   f'<span class="badge" style="background:{colour}">{_e(a["level"])}</span> '
                   f'{names} — {_e(a["status"])} v{a["version"]}</h3>'
                   f'<p>TCA {_e(a["tca"])} · miss {a["miss_m"]:,.0f} m · '
                   f'relative speed {a["rel_speed_ms"]:,.0f} m/s · Pc {pc} · '
                   f'alert rules {_e(a.get("alert_rule") or "none")} · orbits screened: '
                   f'{_e(a["primary_id"])} {orbits[0]}, {_e(a["secondary_id"])} {orbits[1]} · '
                   f'alert <code>{_e(a["alert_id"])}</code> (<code>sda trace {_e(a["alert_id"])}</code>)</p>')
        if a.get("series") is None:
            out.append('<p class="muted">element sets not found: no separation plot</p>')
        else:
            t, s = a["series"]
            out.append(separation_svg(t, s, miss_m=a["miss_m"], threshold_m=threshold_m,
                                      title=f'{a["primary_id"]} × {a["secondary_id"]}: separation around TCA'))
    return "".join(out)


CALIBRATION_TIGHT = 1.3  # observed / predicted above this: the model is too tight
CALIBRATION_LOOSE = 0.7  # below this: too loose
REGIME_ORDER = ("LEO", "MEO", "GEO", "HEO")


def calibration_rows(per_object: Sequence[dict[str, Any]], regimes: dict[int, str]) -> list[dict[str, Any]]:
    """Per regime: observations, objects and ``ratio`` = sqrt(sum gate_d2 / sum components) from
    per-object sums (``norad_id``, ``observations``, ``d2_sum``, ``dof_sum``); objects without a
    regime are ``unknown``."""
    acc: dict[str, list[float]] = {}
    for row in per_object:
        if not row.get("dof_sum"):
            continue
        a = acc.setdefault(regimes.get(int(row["norad_id"]), "unknown"), [0, 0, 0.0, 0.0])
        a[0] += int(row["observations"])
        a[1] += 1
        a[2] += float(row["d2_sum"])
        a[3] += float(row["dof_sum"])
    order = {name: i for i, name in enumerate(REGIME_ORDER)}
    return [{"regime": name, "observations": a[0], "objects": a[1], "ratio": math.sqrt(a[2] / a[3])}
            for name, a in sorted(acc.items(), key=lambda kv: (order.get(kv[0], 99), kv[0]))]


def _calibration_section(rows: list[dict[str, Any]] | None) -> str:
    if not rows:
        return '<p class="muted">No observation was correlated in this run.</p>'
    body = []
    for r in rows:
        ratio = r["ratio"]
        verdict, cls = (("too tight", "bad") if ratio > CALIBRATION_TIGHT else ("too loose", "warn")
                        if ratio < CALIBRATION_LOOSE else ("consistent", "ok"))
        body.append(f'<tr data-regime="{_e(r["regime"])}" data-ratio="{ratio:.4f}"><td>{_e(r["regime"])}</td>'
                    f'<td class="num">{r["observations"]:,}</td><td class="num">{r["objects"]:,}</td>'
                    f'<td class="num">{ratio:.2f}</td><td class="{cls}">{verdict}</td></tr>')
    return ('<p>Residual RMS of the correlated observations divided by the sigma the gate predicted for them '
            '(uncertainty model plus sensor noise): 1 when the model fits, above 1 too tight, below 1 too loose.</p>'
            '<table class="calibration"><tr><th>regime</th><th>observations</th><th>objects</th>'
            f'<th>observed / predicted</th><th></th></tr>{"".join(body)}</table>')


def render(report: dict[str, Any], page_dir: Path, threshold_m: float) -> str:
    run_id = report["run_id"]
    interval = report.get("interval")
    head = (f'<h1>Run <code>{_e(run_id)}</code></h1><p class="muted">'
            + (f"data interval {_e(interval[0])} → {_e(interval[1])} · " if interval else "")
            + f'page built {_e(report["built"])} · <a href="../index.html">all runs</a></p>')
    body = (head + "<h2>Counts per stage</h2>" + _metrics_section(report["metrics"])
            + "<h2>Data quality</h2>" + _quality_section(report["checks"], page_dir)
            + ("<h2>Correlation calibration</h2>" + _calibration_section(report["calibration"])
               if "calibration" in report else "")
            + ("<h2>Orbit determination</h2>"
               + fusion_section(report["fusion"], next((m for m in report["metrics"] if m["stage"] == "fuse"), None))
               if report.get("fusion") is not None else "")
            + ("<h2>Sensor calibration</h2>" + sensor_calibration.section(report["sensor_calibration"])
               if "sensor_calibration" in report else "")
            + "<h2>Alerts</h2>" + _alerts_section(report["alerts"], threshold_m))
    return _page(f"sda-fusion run {run_id}", body)


# --- from the tables ------------------------------------------------------------------------------

def gather(spark: "SparkSession", settings: "Settings", run_id: str) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from sda.lake.tables import TABLES, table_exists
    from sda.pipeline import calibrations
    from sda.pipeline.lineage import element_sets_used
    from sda.pipeline.topology import STAGES

    def rows(table: str, where) -> list[dict[str, Any]]:
        if not table_exists(table, settings):
            return []
        return [r.asDict() for r in TABLES[table].read(spark, settings).where(where).collect()]

    from concurrent.futures import ThreadPoolExecutor

    order = {s.name: i for i, s in enumerate(STAGES)}
    # independent reads, in flight together (the server runs them side by side)
    with ThreadPoolExecutor(max_workers=4) as pool:
        metrics_f, checks_f, alerts_f = (pool.submit(rows, table, F.col("run_id") == run_id)
                                         for table in ("run_metrics", "data_quality", "alert_events"))
        calibration_f = pool.submit(_calibration, spark, settings, run_id, rows)
        sensors_f = pool.submit(calibrations.current, spark, settings)
        metrics = sorted(metrics_f.result(), key=lambda m: (order.get(m["stage"], 99), m["stage"]))
        fusion_f = pool.submit(gather_fusion, spark, settings, metrics[0]["interval_end"] if metrics else None)
        checks = sorted(checks_f.result(), key=lambda c: (c["layer"], c["table"], c["expectation"]))
        alerts = sorted(alerts_f.result(), key=lambda a: (a["tca"], a["alert_id"]))
        calibration = calibration_f.result()
        fusion = fusion_f.result()
    finished = next((m["finished"] for m in metrics if m["stage"] == "conjunction"), None)
    used = element_sets_used(spark, settings, [a[f"{role}_id"] for a in alerts for role in ("primary", "secondary")],
                             finished)
    for a in alerts:
        sets = [used.get(int(a[f"{role}_id"])) for role in ("primary", "secondary")]
        a["series"] = None
        if all(sets):
            a["series"] = separation_series((sets[0]["line1"], sets[0]["line2"]), (sets[1]["line1"], sets[1]["line2"]),
                                            a["tca"].replace(tzinfo=a["tca"].tzinfo or dt.timezone.utc))
    interval = (metrics[0]["interval_start"], metrics[0]["interval_end"]) if metrics else None
    return {"run_id": run_id, "interval": interval, "metrics": metrics, "checks": checks, "alerts": alerts,
            "calibration": calibration, "fusion": fusion, "sensor_calibration": sensors_f.result(),
            "built": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()}


def _calibration(spark: "SparkSession", settings: "Settings", run_id: str, rows) -> list[dict[str, Any]]:
    """:func:`calibration_rows` of the run's correlated observations, regimes from gold catalog."""
    from pyspark.sql import functions as F

    from sda.lake.tables import TABLES, table_exists
    from sda.orbit.correlation import RESIDUALS
    from sda.orbit.uncertainty import orbit_regime

    if not table_exists("correlated", settings):
        return []
    dof = sum((F.col(c).isNotNull().cast("int") for cols in RESIDUALS.values() for c in cols), F.lit(0))
    per_object = [r.asDict() for r in (
        TABLES["correlated"].read(spark, settings)
        .where((F.col("correlate_run_id") == run_id) & F.col("gate_d2").isNotNull())
        .groupBy("norad_id").agg(F.count(F.lit(1)).alias("observations"), F.sum("gate_d2").alias("d2_sum"),
                                 F.sum(dof).alias("dof_sum"))
        .collect())]
    if not per_object:
        return []
    ids = [r["norad_id"] for r in per_object]
    heights = rows("catalog", F.col("norad_id").isin(ids))
    newest: dict[int, dict[str, Any]] = {}
    for h in heights:
        if h["norad_id"] not in newest or h["epoch"] > newest[h["norad_id"]]["epoch"]:
            newest[h["norad_id"]] = h
    regimes = {n: orbit_regime(h["perigee_km"], h["apogee_km"]) for n, h in newest.items()}
    return calibration_rows(per_object, regimes)


def write_index(settings: "Settings") -> Path:
    runs = reports_root(settings) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    pages = sorted((p for p in runs.glob("*/index.html")), key=lambda p: p.stat().st_mtime, reverse=True)
    items = "".join(f'<li><a href="{quote(p.parent.name, safe="")}/index.html">{_e(p.parent.name)}</a> '
                    '<span class="muted">'
                    f'{dt.datetime.fromtimestamp(p.stat().st_mtime, dt.timezone.utc):%Y-%m-%d %H:%M} UTC</span></li>'
                    for p in pages)
    index = runs / "index.html"
    index.write_text(_page("sda-fusion run reports",
                           f"<h1>Run reports</h1><ul>{items or '<li>none yet</li>'}</ul>"
                           '<p><a href="../gx/uncommitted/data_docs/local_site/index.html">'
                           "Great Expectations Data Docs</a></p>"),
                     encoding="utf-8")
    return index


def write_run_report(spark: "SparkSession", settings: "Settings", run_id: str) -> Path:
    """Build the run's page from the tables (a rebuild replaces it) and refresh the runs index."""
    page_dir = run_dir(settings, run_id)
    page_dir.mkdir(parents=True, exist_ok=True)
    page = page_dir / "index.html"
    tmp = page.with_suffix(".html.tmp")
    tmp.write_text(render(gather(spark, settings, run_id), page_dir, settings.screening_threshold_km * 1000.0),
                   encoding="utf-8")
    os.replace(tmp, page)
    write_index(settings)
    return page
