"""Screened approaches of fused objects, refined on the fused orbits' own numerical predictions.

The screening finds its candidates on element sets (:mod:`sda.orbit.screening.fitted_elements`: a fused object's is
fitted to its prediction, within some hundreds of metres of it). What an alert reports -- TCA, miss
distance, the states at TCA and each object's covariance there -- comes for a fused object from the
fused orbit itself: :func:`refine` predicts each fused object once (:func:`sda.orbit.estimation.predict`, with
the covariance grown by the drag it cannot know and process noise) on a grid of :data:`GRID_S` around
each of its events' screened TCAs, the other object by its own fused orbit or, where it has none, by SGP4
on its element set; the closest grid point is refined with the relative motion there (a straight line
over at most ``GRID_S / 2``: millimetres in LEO).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
from sgp4.api import WGS72, Satrec

from sda.orbit import frames
from sda.orbit.estimation.estimator import OdResult
from sda.orbit.estimation.noise import ProcessNoise
from sda.orbit.estimation.predict import predict

HALF_WINDOW_S = 60.0  # the screened TCA is within a second of the fused one in all but slow encounters
GRID_S = 2.0


@dataclasses.dataclass(frozen=True)
class Refined:
    """One event refined: TCA (unix s), TEME states of both [km, km/s] there, the fused objects'
    6x6 TEME covariances there (m-units; None for an object without a fused orbit), and their density
    forecast terms there (CARA's DCP: the relative 1-sigma density error and the state's sensitivity to it,
    TEME m and m/s; None without a fused orbit)."""

    tca_unix: float
    p_state: np.ndarray
    s_state: np.ndarray
    p_cov: np.ndarray | None
    s_cov: np.ndarray | None
    at_edge: bool
    p_dcp: tuple[float, np.ndarray] | None = None
    s_dcp: tuple[float, np.ndarray] | None = None


def _grid(tcas: np.ndarray) -> np.ndarray:
    offsets = np.arange(-HALF_WINDOW_S, HALF_WINDOW_S + 1e-9, GRID_S)
    return (np.asarray(tcas, float)[:, None] + offsets[None, :])


def _fused_tracks(fused: dict[int, OdResult], wanted: dict[int, list[float]], noise: ProcessNoise):
    """{norad: (times, r km, v km/s, cov, density sigma, density sensitivity)} on the grids of its events
    (times at or after the epoch)."""
    out = {}
    for norad, tcas in wanted.items():
        result = fused[norad]
        times = np.unique(np.maximum(_grid(np.array(tcas)).ravel(), result.epoch))
        pred = predict(result, times, noise)
        out[norad] = (times, pred.r_km, pred.v_kms, pred.covariance, pred.density_sigma, pred.density_sensitivity)
    return out


def _sgp4_track(line1: str, line2: str, times: np.ndarray):
    _, r, v = frames.propagate([Satrec.twoline2rv(line1, line2, WGS72)], times)
    return r[0], v[0]


def _lookup(track, times: np.ndarray):
    t, r, v, cov, sigma, sens = track
    idx = np.clip(np.searchsorted(t, times), 0, len(t) - 1)
    return r[idx], v[idx], (cov[idx], sigma[idx], sens[idx])


def refine(events: pd.DataFrame, fused: dict[int, OdResult], lines: dict[int, tuple[str, str]],
           noise: ProcessNoise = ProcessNoise()) -> list[Refined | None]:
    """Per event (rows with primary_id, secondary_id, tca_unix): its refinement where either object has
    a fused orbit in ``fused``, else None. ``lines``: element sets of the other objects; ``noise``: the
    model error the predictions carry (with the landed space weather)."""
    wanted: dict[int, list[float]] = {}
    for p, s, t in zip(events["primary_id"], events["secondary_id"], events["tca_unix"]):
        for n in (int(p), int(s)):
            if n in fused:
                wanted.setdefault(n, []).append(float(t))
    tracks = _fused_tracks(fused, wanted, noise)
    out: list[Refined | None] = []
    for p, s, t in zip(events["primary_id"], events["secondary_id"], events["tca_unix"]):
        p, s = int(p), int(s)
        if p not in tracks and s not in tracks:
            out.append(None)
            continue
        times = _grid(np.array([float(t)]))[0]
        states, covs = [], []
        for n in (p, s):
            if n in tracks:
                r, v, cov = _lookup(tracks[n], times)
            elif n in lines:
                (r, v), cov = _sgp4_track(*lines[n], times), None
            else:
                raise ValueError(f"object {n}: neither a fused orbit nor an element set")
            states.append((r, v))
            covs.append(cov)
        out.append(_closest(times, states, covs))
    return out


def _moved(r: np.ndarray, v: np.ndarray, dt: float) -> np.ndarray:
    """Position ``dt`` seconds on (|dt| <= GRID_S), with two-body gravity's curvature (km)."""
    acc = -frames.MU_KM3_S2 * r / float(np.linalg.norm(r)) ** 3
    return r + v * dt + 0.5 * acc * dt * dt


def _closest(times: np.ndarray, states, covs) -> Refined:
    (r1, v1), (r2, v2) = states
    dr, dv = r2 - r1, v2 - v1
    i = int(np.nanargmin(np.linalg.norm(dr, axis=1)))
    shift = -float(dr[i] @ dv[i]) / max(float(dv[i] @ dv[i]), 1e-18)
    shift = float(np.clip(shift, -GRID_S, GRID_S))
    p = np.r_[_moved(r1[i], v1[i], shift), v1[i]]
    s = np.r_[_moved(r2[i], v2[i], shift), v2[i]]
    cov = [None if c is None else c[0][i] for c in covs]
    dcp = [None if c is None else (float(c[1][i]), c[2][i]) for c in covs]
    return Refined(float(times[i] + shift), p, s, cov[0], cov[1], i in (0, len(times) - 1), dcp[0], dcp[1])
