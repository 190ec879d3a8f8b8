"""The run report's **sensor calibration**: each sensor's newest window's biases (gold ``sensor_calibrations``,
:mod:`sda.pipeline.calibrations`), bias +- its standard error and the observations and objects behind it."""

from __future__ import annotations

from html import escape
from typing import Any

#: what the report prints per quantity: unit and format
UNITS = {"range_m": ("m", "{:.1f}"), "az_deg": ("mdeg", "{:.2f}"), "el_deg": ("mdeg", "{:.2f}"),
         "ra_arcsec": ('"', "{:.2f}"), "dec_arcsec": ('"', "{:.2f}"), "time_ms": ("ms", "{:.2f}")}
ORDER = tuple(UNITS)


def _value(quantity: str, x: float) -> str:
    unit, fmt = UNITS.get(quantity, ("", "{:.3g}"))
    scale = 1000.0 if unit == "mdeg" else 1.0
    return fmt.format(x * scale)


def section(rows: list[dict[str, Any]] | None) -> str:
    """HTML: one table row per sensor and quantity of :func:`sda.pipeline.calibrations.current`."""
    if not rows:
        return '<p class="muted">No sensor calibration yet (it needs well-determined fits of an earlier window).</p>'
    body = []
    for r in sorted(rows, key=lambda r: (r["sensor_id"], ORDER.index(r["quantity"]) if r["quantity"] in ORDER
                                         else 99)):
        q = r["quantity"]
        body.append(f'<tr data-sensor="{escape(r["sensor_id"])}" data-quantity="{escape(q)}" '
                    f'data-bias="{r["bias"]:.6g}" data-sigma="{r["sigma"]:.6g}"><td>{escape(r["sensor_id"])}</td>'
                    f'<td>{escape(q)}</td><td class="num">{_value(q, r["bias"])} ± {_value(q, r["sigma"])} '
                    f'{escape(UNITS.get(q, ("",))[0])}</td><td class="num">{r["n_obs"]:,}</td>'
                    f'<td class="num">{r["n_objects"]:,}</td><td>{escape(str(r["window_start"]))}</td></tr>')
    return ('<p>Each sensor\'s biases (measured - true) estimated from the residuals of well-determined fits in its '
            'newest window; the fuse stage subtracts them from the next windows\' observations.</p>'
            '<table class="sensor-calibration"><tr><th>sensor</th><th>quantity</th><th>bias ± sigma</th>'
            f'<th>observations</th><th>objects</th><th>window</th></tr>{"".join(body)}</table>')
