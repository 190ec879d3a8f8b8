"""Sensor bias calibration: each sensor's biases estimated from the post-fit residuals of well-determined
objects, and applied to its observations.

**Quantities** (named as the simulator's truth names them, :mod:`sda.sim.sky`): radar ``range_m`` (m),
``az_deg`` and ``el_deg`` (deg); optical ``ra_arcsec`` (on the sky: the right ascension's residual times
cos(dec)) and ``dec_arcsec``; every ground sensor's ``time_ms``, a time-tag bias (the sensor measured at
``t + bias`` and reported ``t``). A measured value is ``true + bias + time bias x the value's rate``.

**Estimate.** Per sensor, one weighted least-squares fit of its post-fit residuals (whitened by the registry's
noise) to ``bias_q + time_ms x rate_q`` for each of its quantities ``q`` jointly; the rates are the predicted
measurements' time derivatives (range-rate for range; radar azimuths above :data:`MAX_AZ_EL` left out, where
azimuth races and a time tag's effect on it is not linear). Each fit contributes its normal equations
(:func:`normal_equations`, :func:`contribution`), summed over the objects of an event-time window and solved
(:func:`solve`). A bias's sigma is the larger of its formal standard error (scaled by the residuals' RMS when
above 1) and its delete-one-object jackknife standard error (:func:`jackknife_sigma`). The formal one counts every
residual as independent; but an object's orbit error moves all of its residuals alike, so the estimate is only
as good as the spread between objects, which the jackknife measures (a cluster-robust standard error, no
constant chosen).

**Well-determined objects** only: a converged fit with no manoeuvre, a position sigma under
:data:`MAX_SIGMA_M`, and for a sensor's residuals to count, an orbit fixed by others -- the object has ISL
observations (a relay's navigation solution, nearly unbiased: as operators use calibration satellites), or the
sensor gave at most :data:`MAX_SHARE` of the fit's accepted measurements. A sensor that dominates a fit would see
its bias absorbed by the orbit.

**Applied** (:func:`apply`): the fits of window ``k`` take, per sensor, the newest calibration of a window before
``k`` and not older than :data:`MAX_AGE_WINDOWS` windows, where its bias is at least :data:`SIGNIFICANT` of its
sigmas (a sensor without bias stays uncorrected): the bias subtracted from the measured value, the event
time moved by the time-tag bias (within its window, so an observation stays in the window it was read in). The
residuals the next estimate sees are put back into raw terms (the correction applied added back), so each
estimate is of the whole bias, not of what is left.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from sda.orbit.estimation.measurements import models

ARCSEC = math.pi / (180.0 * 3600.0)
DEG = math.pi / 180.0
#: per kind, its biased quantities: (name, the model's component, radians or metres per quantity unit)
QUANTITIES = {"radar": (("range_m", 0, 1.0), ("az_deg", 1, DEG), ("el_deg", 2, DEG)),
              "optical": (("ra_arcsec", 0, ARCSEC), ("dec_arcsec", 1, ARCSEC))}
TIME = "time_ms"
MAX_SIGMA_M = 1000.0  # a fit's 3-D position sigma (m) above which its residuals do not count
MAX_SHARE = 0.5  # without ISL, a sensor's residuals count where it gave at most this share of the fit
MIN_OBS = 20  # a window's estimate needs this many of a sensor's observations...
MIN_OBJECTS = 2  # ...of this many objects
SIGNIFICANT = 3.0  # a calibration is applied only where its bias is at least this many of its sigmas
MAX_AGE_WINDOWS = 4  # a calibration older than this many windows is not applied
RATE_STEP_S = 0.5
MAX_AZ_EL = math.radians(70.0)  # radar azimuth residuals above this elevation do not count
MU_M3_S2 = 3.986004418e14


def parameters(kind: str) -> tuple[str, ...]:
    """The quantities a sensor kind's fit solves for, its time tag last."""
    return tuple(q for q, _, _ in QUANTITIES.get(kind, ())) + (TIME,)


def _moved(x: np.ndarray, h: float) -> np.ndarray:
    """States ``x`` [m, 6] (m, m/s) carried ``h`` seconds on their two-body arc (second order)."""
    r, v = x[:, :3], x[:, 3:]
    a = -MU_M3_S2 * r / np.linalg.norm(r, axis=1, keepdims=True) ** 3
    return np.concatenate([r + v * h + 0.5 * a * h * h, v + a * h], axis=1)


def measurement_rates(model, x: np.ndarray, t: np.ndarray, obs: pd.DataFrame) -> np.ndarray:
    """[m, k] d(measurement)/dt (units per second) of states ``x`` [m, 6] (TEME, m, m/s) along their two-body arc:
    what a time-tag error does to each measured value."""
    h = RATE_STEP_S
    ahead, behind = model.predict(_moved(x, h), t + h, obs), model.predict(_moved(x, -h), t - h, obs)
    return model.residual(ahead, behind) / (2.0 * h)


def residual_table(blocks, x_teme: np.ndarray, accepted, light_time: bool) -> pd.DataFrame:
    """One row per accepted observation and biased quantity of a fit: ``sensor_id``, ``kind``, ``quantity``,
    the raw residual ``r`` (quantity units: the applied calibration, columns ``cal_<quantity>``, added back),
    ``rate`` (quantity units per ms) and the noise ``sigma`` (quantity units). ``blocks``: the estimator's
    per-kind blocks; ``x_teme`` [times, 6]: the fitted states at the fit's times; ``accepted``: per block, the
    rows outlier editing kept."""
    parts = []
    for block, ok in zip(blocks, accepted):
        if block.kind not in QUANTITIES or not np.any(ok):
            continue
        model, obs, t = models(light_time)[block.kind], block.obs[ok].reset_index(drop=True), block.t[ok]
        x = x_teme[block.index[ok]]
        res = model.residual(block.y[ok], model.predict(x, t, obs))
        rate = measurement_rates(model, x, t, obs) / 1000.0  # per ms
        on_sky = np.cos(obs["dec_rad"].to_numpy(float)) if block.kind == "optical" else np.ones(len(obs))
        cal_t = _cal(obs, TIME)
        high = obs["el_rad"].to_numpy(float) > MAX_AZ_EL if block.kind == "radar" else np.zeros(len(obs), bool)
        for name, j, unit in QUANTITIES[block.kind]:
            scale = on_sky / unit if name == "ra_arcsec" else np.full(len(obs), 1.0 / unit)
            q_rate = rate[:, j] * scale
            raw = res[:, j] * scale + _cal(obs, name) + cal_t * q_rate
            if name == "az_deg":  # near the zenith azimuth races: its rate is no linear model of a time tag
                raw = np.where(high, np.nan, raw)
            parts.append(pd.DataFrame({"sensor_id": obs["sensor_id"].astype(str), "kind": block.kind,
                                       "quantity": name, "r": raw, "rate": q_rate,
                                       "sigma": block.sigma[ok][:, j] * scale}))
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(
        columns=["sensor_id", "kind", "quantity", "r", "rate", "sigma"])
    return out[np.isfinite(out["r"].astype(float)) & (out["sigma"].astype(float) > 0)].reset_index(drop=True)


def _cal(obs: pd.DataFrame, name: str) -> np.ndarray:
    col = f"cal_{name}"
    return obs[col].fillna(0.0).to_numpy(float) if col in obs else np.zeros(len(obs))


def normal_equations(table: pd.DataFrame) -> dict[str, dict]:
    """Per sensor, the whitened normal equations of ``r = bias_q + time x rate`` (:func:`parameters` order):
    ``{"kind", "n" (observations), "ata" (flattened), "atb", "btb"}``."""
    out = {}
    for sid, part in table.groupby("sensor_id", sort=True):
        kind = str(part["kind"].iloc[0])
        names = parameters(kind)
        a = np.zeros((len(part), len(names)))
        rows = np.arange(len(part))
        a[rows, [names.index(q) for q in part["quantity"]]] = 1.0
        a[:, -1] = part["rate"].to_numpy(float)
        w = 1.0 / part["sigma"].to_numpy(float)
        a, b = a * w[:, None], part["r"].to_numpy(float) * w
        n_obs = int(part.groupby("quantity").size().max())
        out[str(sid)] = {"kind": kind, "n": n_obs, "ata": (a.T @ a).ravel().tolist(), "atb": (a.T @ b).tolist(),
                         "btb": float(b @ b), "rows": int(len(part))}
    return out


def well_determined(converged: bool, manoeuvres: int, sigma_m: float) -> bool:
    """Whether a fit's residuals may calibrate (module docstring)."""
    return bool(converged) and manoeuvres == 0 and math.isfinite(sigma_m) and sigma_m <= MAX_SIGMA_M


def contribution(table: pd.DataFrame | None, used: dict[str, int]) -> str | None:
    """A well-determined fit's contribution to its window's calibration (JSON of :func:`normal_equations`, only
    the sensors whose residuals count: module docstring), None when none does. ``used``: the fit's accepted
    observations per kind (ISL present or not)."""
    if table is None or table.empty:
        return None
    has_isl = used.get("isl", 0) > 0
    rows_per_sensor = table.groupby("sensor_id").size()
    total = int(rows_per_sensor.sum()) + 3 * used.get("isl", 0)
    keep = [s for s, n in rows_per_sensor.items() if has_isl or n <= MAX_SHARE * total]
    if not keep:
        return None
    return json.dumps(normal_equations(table[table["sensor_id"].isin(keep)]), separators=(",", ":"))


def solve(contributions) -> list[dict]:
    """A window's calibrations from its fits' contributions (JSON strings): one dict per sensor and quantity,
    ``sensor_id``, ``quantity``, ``bias``, ``sigma``, ``n_obs``, ``n_objects``, for sensors with at least
    :data:`MIN_OBS` observations of :data:`MIN_OBJECTS` objects and a solvable system."""
    sums: dict[str, dict] = {}
    for text in contributions:
        for sid, c in (json.loads(text) if text else {}).items():
            s = sums.setdefault(sid, {"kind": c["kind"], "n": 0, "objects": 0, "rows": 0, "ata": 0.0, "atb": 0.0,
                                      "btb": 0.0, "each": []})
            s["n"] += c["n"]
            s["rows"] += c["rows"]
            s["objects"] += 1
            ata, atb = np.asarray(c["ata"], float), np.asarray(c["atb"], float)
            s["ata"], s["atb"] = s["ata"] + ata, s["atb"] + atb
            s["btb"] += c["btb"]
            s["each"].append((ata, atb))
    out = []
    for sid, s in sorted(sums.items()):
        names = parameters(s["kind"])
        p = len(names)
        if s["n"] < MIN_OBS or s["objects"] < MIN_OBJECTS:
            continue
        ata = np.asarray(s["ata"]).reshape(p, p)
        try:
            cov = np.linalg.inv(ata)
        except np.linalg.LinAlgError:
            continue
        x = cov @ s["atb"]
        chi2 = max(float(s["btb"] - x @ s["atb"]), 0.0)
        scale = max(1.0, math.sqrt(chi2 / max(s["rows"] - p, 1)))
        sig = np.sqrt(np.clip(np.diag(cov), 0.0, None)) * scale
        spread = jackknife_sigma(ata, s["atb"], s["each"])
        if spread is not None:
            sig = np.maximum(sig, spread)
        out += [{"sensor_id": sid, "quantity": q, "bias": float(x[i]), "sigma": float(sig[i]), "n_obs": int(s["n"]),
                 "n_objects": int(s["objects"])} for i, q in enumerate(names) if np.isfinite(x[i])]
    return out


def jackknife_sigma(ata: np.ndarray, atb: np.ndarray, each: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray | None:
    """Delete-one-object jackknife standard errors of the solution of ``ata x = atb`` (the sums of ``each``
    object's normal equations ``(ata_j, atb_j)``, flattened or square): sqrt((m - 1) / m * sum_j (x_-j - mean)^2)
    per parameter, over the m solutions without object j; None with fewer than two objects or where a solution
    without one of them is singular (the formal sigma then stands alone)."""
    m, p = len(each), len(atb)
    if m < 2:
        return None
    solutions = []
    for a_j, b_j in each:
        try:
            solutions.append(np.linalg.solve(ata - a_j.reshape(p, p), atb - b_j))
        except np.linalg.LinAlgError:
            return None
    x = np.asarray(solutions)
    if not np.all(np.isfinite(x)):
        return None
    return np.sqrt((m - 1) / m * ((x - x.mean(axis=0)) ** 2).sum(axis=0))


def lookup(rows, arc_s: float) -> dict[str, list[tuple[int, dict[str, float]]]]:
    """Stored calibrations (dicts with ``sensor_id``, ``window_start_unix``, ``quantity``, ``bias``) as
    ``{sensor_id: [(window index, {quantity: bias}), ...]}`` in window order: what :func:`apply` takes."""
    out: dict[str, dict[int, dict[str, float]]] = {}
    for r in rows:
        sigma = r.get("sigma")
        if sigma is not None and abs(float(r["bias"])) < SIGNIFICANT * float(sigma):
            continue  # not told apart from none: not applied (a sensor without bias stays uncorrected)
        k = int(round(float(r["window_start_unix"]) / arc_s))
        out.setdefault(str(r["sensor_id"]), {}).setdefault(k, {})[str(r["quantity"])] = float(r["bias"])
    return {s: sorted(v.items()) for s, v in out.items()}


def apply(obs: pd.DataFrame, table: dict[str, list[tuple[int, dict[str, float]]]], arc_s: float) -> pd.DataFrame:
    """``obs`` (the fit's columns, :data:`sda.orbit.estimation.measurements.FIT_COLUMNS`) corrected by
    ``table`` (:func:`lookup`): per observation of window ``k``, its sensor's newest calibration of a window in
    ``[k - MAX_AGE_WINDOWS, k)`` (module docstring). Adds the applied amounts as ``cal_<quantity>`` (0 where
    none)."""
    out = obs.copy()
    names = [q for kind in QUANTITIES.values() for q, _, _ in kind] + [TIME]
    cal = {q: np.zeros(len(out)) for q in names}
    if len(out) and table:
        t = (pd.to_datetime(out["event_time"], utc=True) - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
        k = np.floor(t / arc_s).astype(np.int64)
        sensors = out["sensor_id"].astype(str).to_numpy()
        for sid, entries in table.items():
            starts = np.array([e[0] for e in entries], np.int64)
            for i in np.flatnonzero(sensors == sid):
                j = int(np.searchsorted(starts, k[i])) - 1  # the newest window before k
                if j >= 0 and k[i] - starts[j] <= MAX_AGE_WINDOWS:
                    for q, bias in entries[j][1].items():
                        if q in cal:
                            cal[q][i] = bias
        _correct(out, cal, t, k, arc_s)
    for q in names:
        out[f"cal_{q}"] = cal[q]
    return out


def _correct(out: pd.DataFrame, cal: dict[str, np.ndarray], t: np.ndarray, k: np.ndarray, arc_s: float) -> None:
    kind = out["sensor_kind"].astype(str).to_numpy()
    radar, optical = kind == "radar", kind == "optical"
    if "range_m" in out:
        out.loc[radar, "range_m"] = out.loc[radar, "range_m"] - cal["range_m"][radar]
    for col, q in (("az_rad", "az_deg"), ("el_rad", "el_deg")):
        if col in out:
            out.loc[radar, col] = out.loc[radar, col] - cal[q][radar] * DEG
    if "dec_rad" in out and "ra_rad" in out:
        dec = out["dec_rad"].to_numpy(float) - cal["dec_arcsec"] * ARCSEC
        ra = out["ra_rad"].to_numpy(float) - cal["ra_arcsec"] * ARCSEC / np.maximum(np.cos(dec), 1e-3)
        out.loc[optical, "dec_rad"] = dec[optical]
        out.loc[optical, "ra_rad"] = np.mod(ra[optical], 2.0 * np.pi)
    shift = cal[TIME] / 1000.0
    if np.any(shift != 0.0):
        # the sensor measured at t + bias: the event time moved there, kept within its window
        moved = np.clip(t + shift, k * arc_s, (k + 1) * arc_s - 1e-6)
        times = pd.to_datetime(np.round(moved * 1e6).astype(np.int64), unit="us", utc=True)
        aware = getattr(out["event_time"].dt, "tz", None) is not None
        out["event_time"] = times if aware else times.tz_localize(None)
    return None


__all__ = ["QUANTITIES", "TIME", "parameters", "residual_table", "normal_equations", "well_determined",
           "contribution", "solve", "lookup", "apply"]
