"""The sensor calibration against the truth (bench/accuracy.py's ``sensor_calibration``): each sensor's newest
estimated bias per quantity (gold ``sensor_calibrations``, sda.orbit.estimation.calibration) beside its true
bias, the simulator's drifting bias (sda.sim.sky.Drifting) at the middle of the estimate's window, and the noise
sigma the registry gives the quantity.

Target (issue 54): the estimate within 30 % of the true bias, or within one noise sigma where the true bias is
smaller than one noise sigma (a time tag's noise sigma: :data:`TIME_NOISE_MS`). The truth's ``ra_arcsec`` is on
the sky (the simulator divides it by cos(dec)), as the estimate is.
"""

from __future__ import annotations

import math

#: the truth's quantity names are the estimate's; the registry noise sigma of each, in the quantity's unit
NOISE = {"range_m": ("sigma_range_m", 1.0), "az_deg": ("sigma_angle_deg", 1.0), "el_deg": ("sigma_angle_deg", 1.0),
         "ra_arcsec": ("sigma_angle_deg", 3600.0), "dec_arcsec": ("sigma_angle_deg", 3600.0)}
RELATIVE = 0.3
TIME_NOISE_MS = 1.0  # a time tag has no registry noise: one millisecond stands for it


def drifting(b: dict, unix_s: float) -> float:
    """A recorded ``Drifting`` bias (offset, amplitude, period_s, phase) at ``unix_s``."""
    return b["offset"] + b["amplitude"] * math.sin(2.0 * math.pi * unix_s / b["period_s"] + b["phase"])


def noise_sigma(quantity: str, sensor: dict | None) -> float | None:
    """One measurement's registry noise in the quantity's unit (a time tag: :data:`TIME_NOISE_MS`)."""
    if quantity == "time_ms":
        return TIME_NOISE_MS
    name, scale = NOISE.get(quantity, (None, 1.0))
    value = (sensor or {}).get(name) if name else None
    return None if value is None or value != value else float(value) * scale


def meets(estimated: float, true: float, sigma_noise: float | None) -> bool:
    """Within 30 % of the true bias, or within one noise sigma where |true| is under one noise sigma."""
    if sigma_noise is not None and abs(true) < sigma_noise:
        return abs(estimated - true) <= sigma_noise
    return abs(estimated - true) <= RELATIVE * abs(true)


def score_sensor_calibrations(calibrations, truth_sky: dict | None, registry: dict) -> dict:
    """Per sensor and quantity (``"<sensor>/<quantity>"``) of each sensor's newest window: estimated, sigma, true,
    noise sigma, error, meets; and the share that meets. ``calibrations``: rows (dicts) of gold
    ``sensor_calibrations`` with ``window_start_unix`` and ``window_end_unix``; ``truth_sky``: the simulation
    summary's ``sky``; ``registry``: sensor id -> its registry row (dict)."""
    sensors = (truth_sky or {}).get("sensors") or {}
    newest: dict[str, float] = {}
    for r in calibrations:
        newest[r["sensor_id"]] = max(newest.get(r["sensor_id"], -math.inf), r["window_start_unix"])
    out: dict[str, dict] = {}
    for r in sorted(calibrations, key=lambda r: (r["sensor_id"], r["quantity"])):
        truth = (sensors.get(r["sensor_id"]) or {}).get("biases", {}).get(r["quantity"])
        if truth is None or r["window_start_unix"] != newest[r["sensor_id"]]:
            continue
        true = drifting(truth, 0.5 * (r["window_start_unix"] + r["window_end_unix"]))
        sigma_noise = noise_sigma(r["quantity"], registry.get(r["sensor_id"]))
        out[f"{r['sensor_id']}/{r['quantity']}"] = {
            "estimated": r["bias"], "sigma": r["sigma"], "true": true, "noise_sigma": sigma_noise,
            "error": r["bias"] - true, "n_obs": r["n_obs"], "n_objects": r["n_objects"],
            "meets": meets(r["bias"], true, sigma_noise)}
    n = len(out)
    return {"rows": out, "count": n, "meets": sum(v["meets"] for v in out.values()),
            "share_meets": (sum(v["meets"] for v in out.values()) / n) if n else None,
            "target": "within 30 % of the true bias, or within one noise sigma where |true| < one noise sigma"}
