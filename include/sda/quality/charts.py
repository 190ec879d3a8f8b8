"""The run page's charts, as hand-written SVG (no plotting library in the job's environment): the
record counts per stage (:func:`stage_counts_svg`) and a pair's separation around TCA on a log scale
(:func:`separation_svg`). Every mark carries ``data-*`` attributes with the value it draws, so a test or
a script can read the picture back. The page around them is :mod:`sda.quality.report`.
"""

from __future__ import annotations

import html
import math
from typing import Any, Sequence

import numpy as np

COUNTS = ("records_in", "records_out", "quarantined", "duplicates", "late")
COLOURS = {"records_in": "#4e79a7", "records_out": "#59a14f", "quarantined": "#e15759", "duplicates": "#f28e2b",
           "late": "#b07aa1"}


def escape(value: Any) -> str:
    """Text or an attribute value for HTML / SVG (None: empty)."""
    return html.escape("" if value is None else str(value), quote=True)


def _num(value: float) -> str:
    return f"{value:.1f}"


def stage_counts_svg(stages: Sequence[tuple[str, dict[str, int | None]]], width: int = 760) -> str:
    """Horizontal grouped bars: one group per stage, one bar per count it reports (linear scale from 0)."""
    label_w, value_w, bar_h, gap = 110, 70, 12, 10
    plot_w = width - label_w - value_w
    present = [(stage, {k: int(v) for k, v in counts.items() if k in COUNTS and v is not None})
               for stage, counts in stages]
    top = max([v for _, counts in present for v in counts.values()] + [1])
    y = 28
    parts = []
    for stage, counts in present:
        group_h = max(1, len(counts)) * (bar_h + 2)
        parts.append(f'<text x="{label_w - 8}" y="{y + group_h / 2 + 4:.1f}" text-anchor="end" class="stage">'
                     f'{escape(stage)}</text>')
        if not counts:
            parts.append(f'<text x="{label_w}" y="{y + 10}" class="muted">no record counts</text>')
        for i, (name, value) in enumerate(counts.items()):
            w = plot_w * value / top
            by = y + i * (bar_h + 2)
            parts.append(f'<rect x="{label_w}" y="{by}" width="{w:.2f}" height="{bar_h}" fill="{COLOURS[name]}" '
                         f'data-stage="{escape(stage)}" data-count="{name}" data-value="{value}">'
                         f'<title>{escape(stage)} {name.replace("_", " ")}: {value}</title></rect>')
            parts.append(f'<text x="{label_w + w + 4:.2f}" y="{by + bar_h - 2}" class="value">{value:,}</text>')
        y += group_h + gap
    legend = []
    x = label_w
    for name in COUNTS:
        legend.append(f'<rect x="{x}" y="6" width="10" height="10" fill="{COLOURS[name]}"/>'
                      f'<text x="{x + 14}" y="15" class="legend">{name.replace("_", " ")}</text>')
        x += 120
    height = y + 6
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart counts" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" data-max="{top}" data-plot-width="{plot_w}" role="img" '
            f'aria-label="records per stage">{"".join(legend)}{"".join(parts)}</svg>')


def _distance_label(metres: float) -> str:
    return f"{metres:g} m" if metres < 1000 else f"{metres / 1000:g} km"


def separation_svg(t_s: np.ndarray, sep_m: np.ndarray, *, miss_m: float, threshold_m: float | None = None,
                   title: str = "", width: int = 760, height: int = 300) -> str:
    """Separation (log scale) against seconds from TCA; the miss distance marked at t = 0."""
    ok = np.isfinite(sep_m) & (sep_m > 0)
    t, s = np.asarray(t_s, float)[ok], np.asarray(sep_m, float)[ok]
    if t.size < 2:
        return f'<p class="muted">no separation to draw for {escape(title)} (propagation failed)</p>'
    left, right, top, bottom = 70, 20, 28, 40
    pw, ph = width - left - right, height - top - bottom
    lo_values = [s.min(), miss_m] + ([threshold_m] if threshold_m else [])
    hi_values = [s.max()] + ([threshold_m] if threshold_m else [])
    y_lo = math.floor(math.log10(max(min(lo_values), 1e-3)))
    y_hi = math.ceil(math.log10(max(hi_values)))
    y_hi = max(y_hi, y_lo + 1)
    t_lo, t_hi = float(t.min()), float(t.max())

    def x_of(v: float) -> float:
        return left + pw * (v - t_lo) / (t_hi - t_lo)

    def y_of(v: float) -> float:
        return top + ph * (y_hi - math.log10(v)) / (y_hi - y_lo)

    parts = []
    for decade in range(y_lo, y_hi + 1):
        value = 10.0 ** decade
        y = y_of(value)
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{_num(y)}" y2="{_num(y)}" class="grid" '
                     f'data-decade="{decade}"/>'
                     f'<text x="{left - 6}" y="{_num(y + 4)}" text-anchor="end" class="tick">'
                     f'{_distance_label(value)}</text>')
    span = t_hi - t_lo
    step = next(st for st in (1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600) if span / st <= 10)
    for tick in np.arange(math.ceil(t_lo / step) * step, t_hi + 1e-9, step):
        x = x_of(float(tick))
        parts.append(f'<line x1="{_num(x)}" x2="{_num(x)}" y1="{top}" y2="{top + ph}" class="grid"/>'
                     f'<text x="{_num(x)}" y="{top + ph + 16}" text-anchor="middle" class="tick">{tick:+g}</text>')
    if threshold_m:
        y = y_of(threshold_m)
        parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{_num(y)}" y2="{_num(y)}" class="threshold" '
                     f'data-threshold-m="{threshold_m:g}"/>'
                     f'<text x="{left + pw - 4}" y="{_num(y - 4)}" text-anchor="end" '
                     f'class="tick">screening threshold {_distance_label(threshold_m)}</text>')
    points = " ".join(f"{x_of(a):.2f},{y_of(b):.2f}" for a, b in zip(t, s))
    parts.append(f'<polyline points="{points}" class="separation" fill="none" data-samples="{t.size}"/>')
    if t_lo <= 0.0 <= t_hi and miss_m > 0:
        parts.append(f'<circle cx="{_num(x_of(0.0))}" cy="{_num(y_of(miss_m))}" r="4" class="tca" '
                     f'data-miss-m="{miss_m:.1f}">'
                     f'<title>TCA: miss {miss_m:.1f} m</title></circle>'
                     f'<text x="{_num(x_of(0.0) + 8)}" y="{_num(y_of(miss_m) + 4)}" class="tick">'
                     f'TCA, {miss_m:,.0f} m</text>')
    parts.append(f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle" class="axis">'
                 'seconds from TCA</text>')
    parts.append(f'<text x="{left}" y="16" class="axis">{escape(title)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart separation" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" data-t-min="{t_lo:g}" data-t-max="{t_hi:g}" data-log10-min="{y_lo}" '
            f'data-log10-max="{y_hi}" data-left="{left}" data-top="{top}" '
            f'data-plot-width="{pw}" data-plot-height="{ph}" '
            f'role="img" aria-label="separation around TCA">{"".join(parts)}</svg>')

