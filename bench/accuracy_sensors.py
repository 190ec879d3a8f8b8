"""The sensor calibration against the truth (bench/accuracy.py's ``sensor_calibration``): each sensor's newest
estimated bias per quantity (gold ``sensor_calibrations``, sda.orbit.estimation.calibration) beside its true
bias, the simulator's drifting bias (sda.sim.sky.Drifting) at the middle of the estimate's window, and the noise
sigma the registry gives the quantity.

Target (issue 54): the estimate within 30 % of the true bias, or within one noise sigma where the true bias is
smaller than one noise sigma (a time tag's noise sigma: :data:`TIME_NOISE_MS`). The truth's ``ra_arcsec`` is on
the sky (the simulator divides it by cos(dec)), as the estimate is.

Scored against doing nothing (:func:`against_nothing`): not calibrating leaves the whole true bias, so per row the
estimate's error beside the true bias, their ratio, and whether calibrating improves on nothing; what the fits
did with it (the estimate is applied only where it is :data:`SIGNIFICANT` of its sigmas: otherwise the fits keep
the whole bias); the target met by estimating zero everywhere; and the distribution of |error| / sigma, which an
honest sigma keeps near 0.8 (the median of |N(0, 1)|: 0.67).
"""

from __future__ import annotations

import math

#: the truth's quantity names are the estimate's; the registry noise sigma of each, in the quantity's unit
NOISE = {"range_m": ("sigma_range_m", 1.0), "az_deg": ("sigma_angle_deg", 1.0), "el_deg": ("sigma_angle_deg", 1.0),
         "ra_arcsec": ("sigma_angle_deg", 3600.0), "dec_arcsec": ("sigma_angle_deg", 3600.0)}
RELATIVE = 0.3
TIME_NOISE_MS = 1.0  # a time tag has no registry noise: one millisecond stands for it
SIGNIFICANT = 3.0  # sda.orbit.estimation.calibration.SIGNIFICANT: an estimate under this many sigmas is not applied


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
            "target": "within 30 % of the true bias, or within one noise sigma where |true| < one noise sigma",
            **against_nothing(out)}


def _median(values: list[float]) -> float | None:
    v = sorted(values)
    if not v:
        return None
    return v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2])


def against_nothing(rows: dict[str, dict]) -> dict:
    """The scored rows (:func:`score_sensor_calibrations`) against not calibrating (module docstring); adds to each
    row ``uncalibrated_error`` (the true bias), ``ratio`` (|error| / |true bias|), ``improves``, ``applied``,
    ``applied_error`` (what the fits are left with) and ``z`` (|error| / sigma)."""
    groups: dict[str, list[dict]] = {}
    for key, r in rows.items():
        err, true, sigma = abs(r["error"]), abs(r["true"]), r.get("sigma")
        r["uncalibrated_error"] = r["true"]
        r["ratio"] = err / true if true > 0 else None
        r["improves"] = err < true
        r["applied"] = sigma is not None and sigma > 0 and abs(r["estimated"]) >= SIGNIFICANT * sigma
        r["applied_error"] = r["error"] if r["applied"] else r["true"]
        r["z"] = err / sigma if sigma else None
        groups.setdefault(key.split("/", 1)[1], []).append(r)
    n = len(rows)
    z = [r["z"] for r in rows.values() if r["z"] is not None]
    by_quantity = {q: {"rows": len(g), "improves": sum(r["improves"] for r in g),
                       "ratio_median": _median([r["ratio"] for r in g if r["ratio"] is not None]),
                       "applied": sum(r["applied"] for r in g),
                       "applied_worse": sum(r["applied"] and not r["improves"] for r in g)}
                   for q, g in sorted(groups.items())}
    return {
        "nothing_meets": sum(meets(0.0, r["true"], r["noise_sigma"]) for r in rows.values()),
        "share_improves": (sum(r["improves"] for r in rows.values()) / n) if n else None,
        "ratio_median": _median([r["ratio"] for r in rows.values() if r["ratio"] is not None]),
        "applied": sum(r["applied"] for r in rows.values()),
        "applied_worse": sum(r["applied"] and not r["improves"] for r in rows.values()),
        "z_median": _median(z), "z_p90": sorted(z)[int(0.9 * (len(z) - 1))] if z else None,
        "z_share_within_2": (sum(v <= 2.0 for v in z) / len(z)) if z else None,
        "z_target": "median between 0.5 and 2 on held-out seeds (an honest sigma: about 0.67)",
        "by_quantity": by_quantity,
    }
