"""The fusion stage's per-object work: one fused orbit per (object, event-time arc window), chained.

Event time decides the arcs: window ``k`` of an object holds its correlated observations with
``floor(event_time / arc_s) = k`` (``settings.fusion_arc_h``). The fused orbit of window ``k`` is the fit
(:func:`sda.orbit.estimation.fit`) of those observations with, as prior, the newest *converged* fused orbit of an
earlier window of the object not older than :data:`PRIOR_MAX_AGE_ARCS` arcs (carried to the window's
first observation with its covariance grown, :func:`sda.orbit.estimation.prior_from_result`), else the
catalogue's newest element set there (:func:`sda.orbit.estimation.prior_from_tle`). The prior's observations are
never fitted twice: an observation is in its own window's fit, or, when that fit left it waiting for the next
pass (or did not converge), in the next converged one (:func:`waiting`); a window's orbit is a pure function
of the observations of it and of the windows before: whatever the file order or run split, the same
observations give the same orbits (:func:`fuse_object` sorts them by event time and ``obs_id``).
A late observation in window ``j`` re-fits window ``j`` and every later window of its object.

Each converged fit over at least ``lines_min_span_s`` also gets the element set the screening propagates
(:mod:`sda.orbit.screening.fitted_elements`), fitted to the fused orbit's numerical prediction from its epoch over
``lines_span_s`` (the screening horizon plus an arc); a shorter converged fit is still the next window's
prior. Whether a new set counts as a change for the incremental screening is the
screening's decision (:mod:`sda.orbit.screening.renewal`), not this stage's: the fused orbits stay
a function of the observations alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

import numpy as np
import pandas as pd
from sgp4.api import WGS72, Satrec

from sda.orbit import frames, uncertainty
from sda.orbit.estimation import calibration, dynamics
from sda.orbit.estimation.estimator import CONVERGED, OdConfig, OdResult, _teme7, fit
from sda.orbit.estimation.prior import prior_from_tle, rtn_to_teme6
from sda.orbit.manoeuvre.detection import ManoeuvreSettings
from sda.orbit.manoeuvre.segments import fit_segments
from sda.orbit.screening.fitted_elements import fit_to_trajectory
from sda.orbit.times import unix_seconds

PRIOR_MAX_AGE_ARCS = 4  # an earlier fused orbit older than this many arcs is not a prior: the catalogue is
LINES_STEP_S = 600.0  # the screening element set is fitted to the prediction at this spacing
KINDS = ("radar", "optical", "isl")


@dataclasses.dataclass(frozen=True)
class ArcSettings:
    arc_s: float = 6 * 3600.0
    lines_span_s: float = 30 * 3600.0
    #: a fit over a shorter span gets no screening element set: the screening does not use it
    #: (``settings.fusion_min_span_s``, which the stage passes here), and the set costs ~0.1 s of
    #: numerical propagation over ``lines_span_s`` -- nine tenths of a short arc's work
    lines_min_span_s: float = 0.0
    config: OdConfig = OdConfig()
    manoeuvre: ManoeuvreSettings = ManoeuvreSettings()


def window_index(unix_s: np.ndarray, arc_s: float) -> np.ndarray:
    return np.floor(np.asarray(unix_s, float) / arc_s).astype(np.int64)


def result_from_row(row) -> OdResult:
    """The :class:`OdResult` a stored fused-orbit row holds (what the next window's prior needs)."""
    state = np.array([row["x_km"], row["y_km"], row["z_km"], row["vx_kms"], row["vy_kms"], row["vz_kms"]]) * 1000.0
    return OdResult(float(row["epoch_unix"]), state, np.asarray(row["covariance"], float).reshape(7, 7),
                    float(row["b_m2_kg"]), float(row["fit_start_unix"]), float(row["epoch_unix"]), {}, {}, 0,
                    float(row["rms"]), int(row["iterations"]), str(row["status"]))


def obs_digest(obs_ids) -> str:
    """sha256 of the sorted obs_ids fitted: names the observations a fused orbit was fitted to."""
    return hashlib.sha256("\n".join(sorted(map(str, obs_ids))).encode()).hexdigest()


def _sigmas_rtn(result: OdResult) -> np.ndarray:
    r, v = result.state[:3], result.state[3:]
    big = rtn_to_teme6(r, v)[:3, :3]
    cov = big.T @ result.covariance[:3, :3] @ big
    return np.sqrt(np.clip(np.diag(cov), 0.0, None))


def screening_lines(result: OdResult, reference: Satrec, settings: ArcSettings) -> dict:
    """The screening element set of a converged fit (module docstring)."""
    t0 = float(result.epoch)
    times = t0 + np.arange(0.0, settings.lines_span_s + 1.0, LINES_STEP_S)
    rot0 = dynamics.teme_rotation([t0])[0]
    x0 = _teme7(rot0).T @ np.append(result.state, result.b)
    traj = dynamics.propagate(t0, x0[:6], x0[6], times, variational=False)
    r_teme = np.einsum("mij,mj->mi", dynamics.teme_rotation(times), traj.x[:, :3]) / 1000.0
    fitted = fit_to_trajectory(reference, t0, times, r_teme)
    return {"line1": fitted.line1, "line2": fitted.line2, "lines_rms_m": fitted.rms_m, "lines_max_m": fitted.max_m}


def _record(norad: int, k: int, obs: pd.DataFrame, result: OdResult, lines: dict | None,
            settings: ArcSettings) -> dict:
    state_km = result.state / 1000.0
    finite = bool(np.isfinite(result.state).all())
    hp, ha = (dynamics.perigee_km(result.state), apogee_km(result.state)) if finite else (math.nan, math.nan)
    sig = _sigmas_rtn(result) if finite and np.isfinite(result.covariance).all() else np.full(3, math.nan)
    digest = obs_digest(obs["obs_id"])
    row = {
        "norad_id": int(norad), "window_start_unix": k * settings.arc_s, "window_end_unix": (k + 1) * settings.arc_s,
        "epoch_unix": float(result.epoch), "fit_start_unix": float(result.fit_start),
        **dict(zip(("x_km", "y_km", "z_km", "vx_kms", "vy_kms", "vz_kms"), map(float, state_km))),
        "b_m2_kg": float(result.b), "covariance": [float(x) for x in result.covariance.ravel()],
        "sigma_r_m": float(sig[0]), "sigma_t_m": float(sig[1]), "sigma_n_m": float(sig[2]),
        **{f"n_{kind}": int(result.observations.get(kind, 0)) for kind in KINDS},
        **{f"used_{kind}": int(result.used.get(kind, 0)) for kind in KINDS},
        "observations": int(len(obs)), "outliers": int(result.outliers),
        "rms": float(result.rms), "iterations": int(result.iterations), "status": result.status,
        "reason": result.reason or None, "source": "fused" if result.converged else "catalogue",
        "prior_source": result.prior_source, "regime": uncertainty.orbit_regime(hp, ha) if finite else None,
        "obs_digest": digest, "fused_id": hashlib.sha256(f"{norad}/{k}/{digest}".encode()).hexdigest()[:32],
        "model": result.model, "line1": None, "line2": None, "lines_rms_m": None, "lines_max_m": None,
        "calibration_json": None,
    }
    if lines:
        row.update(lines)
    return row


def apogee_km(state_m: np.ndarray) -> float:
    r, v = state_m[:3], state_m[3:]
    mu = dynamics.MU_M3_S2
    a = 1.0 / (2.0 / np.linalg.norm(r) - v @ v / mu)
    e = np.linalg.norm(((v @ v - mu / np.linalg.norm(r)) * r - (r @ v) * v) / mu)
    return float(a * (1 + e) / 1000.0 - frames.R_EARTH_KM)


def fuse_object(norad: int, obs: pd.DataFrame, previous: dict | None, line1: str | None, line2: str | None,
                sigmas, settings: ArcSettings = ArcSettings()) -> list[dict]:
    """The fused orbits of one object's windows that have observations in ``obs`` (all of each such
    window's observations), in window order. ``previous``: the newest converged fused-orbit row of an
    earlier window (or None); ``line1``/``line2``: the catalogue's newest element set (None: unknown).
    ``obs`` may hold observations held uncorrelated that named this object as nearest (column
    ``candidate`` true): they are tested against the fused prediction (:func:`fit_window`) and fitted
    only where it explains them. Each row also says what :func:`fit_window` found: ``manoeuvres`` (a
    list of dicts, in time order) and ``reassociated_ids`` (the held observations it fitted)."""
    obs = obs.sort_values(["event_time", "obs_id"], kind="stable").reset_index(drop=True)
    t = unix_seconds(obs["event_time"])
    k_of = window_index(t, settings.arc_s)
    earlier = obs["waiting"].fillna(False).to_numpy(bool) if "waiting" in obs else np.zeros(len(obs), bool)
    reference = Satrec.twoline2rv(line1, line2, WGS72) if line1 and line2 else None
    rows = []
    for k in np.unique(k_of[~earlier]):
        rows_k = (k_of == k) & ~earlier
        rows_k |= waiting(obs, t, k_of, k, previous)
        part, tk = obs[rows_k].reset_index(drop=True), t[rows_k]
        try:
            found = fit_window(part, tk, previous, reference, sigmas, settings)
        except (ValueError, dynamics.PropagationError) as exc:
            own = ~candidates(part)
            found = (_failed(part[own], tk[own], str(exc)), part[own], {}) if own.any() else None
        if found is None:
            continue  # no prior at all: an object the catalogue does not hold, or only held observations
        result, fitted, extra = found
        lines = None
        long_enough = result.epoch - result.fit_start >= settings.lines_min_span_s
        if result.converged and reference is not None and (long_enough or result.prior_source == "manoeuvre"):
            try:
                lines = screening_lines(result, reference, settings)
            except (ValueError, dynamics.PropagationError) as exc:
                result.status, result.reason = "failed", f"screening element set: {exc}"
        row = _record(norad, int(k), fitted, result, lines, settings)
        ok = result.status == CONVERGED
        row["manoeuvres"] = extra.get("manoeuvres", []) if ok else []
        for seq, man in enumerate(row["manoeuvres"]):
            man["seq"] = seq
            # the detection's name: later passes refit the window (a new fused_id) but keep its bracket
            name = f"manoeuvre/{norad}/{int(k)}/{seq}/{man['burn_after_unix']:.3f}/{man['burn_before_unix']:.3f}"
            man["manoeuvre_id"] = hashlib.sha256(name.encode()).hexdigest()[:32]
        row["reassociated_ids"] = list(extra.get("reassociated_ids", [])) if ok else []
        sigma_m = math.sqrt(row["sigma_r_m"] ** 2 + row["sigma_t_m"] ** 2 + row["sigma_n_m"] ** 2)
        if calibration.well_determined(ok, len(row["manoeuvres"]), sigma_m):
            row["calibration_json"] = calibration.contribution(result.residuals, result.used)
        rows.append(row)
        if result.status == CONVERGED:
            previous = row
    return rows


def waiting(obs: pd.DataFrame, t: np.ndarray, k_of: np.ndarray, k: int, previous: dict | None) -> np.ndarray:
    """Which of ``obs`` wait for window ``k``: the object's own observations of earlier windows after its prior's
    epoch, which no converged fit took (a pass that failed alone at a window's end,
    :func:`sda.orbit.manoeuvre.detection.pending`; a window that did not converge); window ``k`` tests and fits
    them first. ``obs`` holds them when fitted with those windows, or, fitting ``k`` alone, as rows flagged
    ``waiting`` (the stage reads them: jobs/fuse.py)."""
    if previous is None:
        return np.zeros(len(obs), bool)
    return ~candidates(obs) & (k_of < k) & (t > float(previous["epoch_unix"]))


def candidates(part: pd.DataFrame) -> np.ndarray:
    """Which rows are held uncorrelated observations naming the object as nearest (column ``candidate``)."""
    if "candidate" not in part:
        return np.zeros(len(part), bool)
    return part["candidate"].fillna(False).to_numpy(bool)


def fit_window(part: pd.DataFrame, tk: np.ndarray, previous: dict | None, reference: Satrec | None, sigmas,
               settings: ArcSettings) -> tuple[OdResult, pd.DataFrame, dict] | None:
    """One window's fit: (result, the observations fitted, what else was found), or None (no prior, or
    nothing of the object's own to fit).

    With a fused prior (the previous converged window, :data:`PRIOR_MAX_AGE_ARCS`), the window's passes
    are tested against its prediction burn by burn (:func:`sda.orbit.manoeuvre.segments.fit_segments`): the
    ``manoeuvres`` found, and the held observations the fits explained (``reassociated_ids``). Without
    a fused prior, the catalogue's element set is the prior and held observations are not used."""
    held = candidates(part)
    t_first = float(tk.min())
    usable = previous is not None and t_first - PRIOR_MAX_AGE_ARCS * settings.arc_s <= previous["epoch_unix"] <= t_first
    if not usable:
        own = ~held
        if reference is None or not own.any():
            return None
        return fit(part[own], prior_from_tle(reference, float(tk[own].min())), sigmas, settings.config), part[own], {}
    window = fit_segments(part, tk, held, result_from_row(previous), previous.get("fused_id"), sigmas, settings.config,
                          settings.manoeuvre)
    if window is None:
        return None
    for manoeuvre in window.manoeuvres:
        manoeuvre.pop("_pre", None)
        manoeuvre.pop("_later", None)
    return window.result, window.fitted, {"manoeuvres": window.manoeuvres, "reassociated_ids": window.reassociated}


def _failed(part: pd.DataFrame, t: np.ndarray, reason: str) -> OdResult:
    counts = part["sensor_kind"].value_counts().to_dict()
    t_end = float(t.max())
    return OdResult(t_end, np.full(6, np.nan), np.full((7, 7), np.nan), math.nan, float(t.min()), t_end,
                    counts, {}, 0, math.nan, 0, "failed", reason)
