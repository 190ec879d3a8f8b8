"""Fused orbits as the correlation's predictions (:func:`sda.orbit.correlation.correlate_frame`, ``tracks=``).

An object with a fused orbit is predicted by it instead of by its element set: :func:`from_results`
propagates each fused orbit once (:func:`sda.orbit.estimation.predict`: the estimator's force model, the
covariance grown by drag-consider and process noise) on a grid of :data:`STEP_S` over the window to
correlate, and :class:`Tracks` gives, at any time in it, the predicted TEME state (cubic Hermite
interpolation of positions and velocities between nodes: under a centimetre in LEO at 20 s) and the full
6x6 position / velocity covariance on the predicted orbit's R, T, N axes (linear between nodes, where
it changes by a fraction of a per cent). The correlator uses them for the spatial prefilter (position,
speed and 3-D sigma at the batch's reference time, :meth:`Tracks.at_reference`) and for the gate
(:meth:`Tracks.measure`: the measurement model of :mod:`sda.orbit.correlation.gate` with the full covariance,
``S = H C H^T + diag(sigma_sensor^2)``); the objects without a track keep their element set and the
catalogue's uncertainty model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import pandas as pd

from sda.orbit.correlation import gate
from sda.orbit.estimation.estimator import OdResult
from sda.orbit.estimation.measurements import rtn_covariance
from sda.orbit.estimation.predict import ProcessNoise, predict

STEP_S = 20.0


@dataclasses.dataclass(frozen=True)
class Tracks:
    """Predictions of catalogue rows ``rows`` (sorted, unique) at the node times ``t`` [g]: TEME
    positions ``r_km`` [k, g, 3] and velocities ``v_kms`` [k, g, 3], covariances ``cov_rtn`` [k, g, 6, 6]
    of the position / velocity error along each node's R, T, N axes (m, m/s)."""

    rows: np.ndarray
    t: np.ndarray
    r_km: np.ndarray
    v_kms: np.ndarray
    cov_rtn: np.ndarray

    def index(self, obj_rows: np.ndarray) -> np.ndarray:
        """Each catalogue row's track (its position in ``rows``), -1 for a row without one."""
        obj_rows = np.asarray(obj_rows, dtype=np.int64)
        if len(self.rows) == 0:
            return np.full(len(obj_rows), -1, dtype=np.int64)
        pos = np.clip(np.searchsorted(self.rows, obj_rows), 0, len(self.rows) - 1)
        return np.where(self.rows[pos] == obj_rows, pos, -1)

    def _node(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """Each time's interval (its first node) and fraction of it, and the node spacing."""
        h = float(self.t[1] - self.t[0])
        i = np.clip(np.floor((np.asarray(t, float) - self.t[0]) / h).astype(np.int64), 0, len(self.t) - 2)
        return i, (np.asarray(t, float) - self.t[i]) / h, h

    def state(self, idx: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """TEME position (km) and velocity (km/s) of tracks ``idx`` at times ``t`` (cubic Hermite)."""
        i, s, h = self._node(t)
        r0, r1, v0, v1 = self.r_km[idx, i], self.r_km[idx, i + 1], self.v_kms[idx, i], self.v_kms[idx, i + 1]
        s = s[:, None]
        r = ((2 * s**3 - 3 * s**2 + 1) * r0 + (s**3 - 2 * s**2 + s) * h * v0 + (3 * s**2 - 2 * s**3) * r1
             + (s**3 - s**2) * h * v1)
        v = ((6 * s**2 - 6 * s) * (r0 - r1) / h + (3 * s**2 - 4 * s + 1) * v0 + (3 * s**2 - 2 * s) * v1)
        return r, v

    def covariance(self, idx: np.ndarray, t: np.ndarray) -> np.ndarray:
        """[m, 6, 6] covariance along R, T, N of tracks ``idx`` at times ``t`` (linear between nodes)."""
        i, s, _ = self._node(t)
        s = np.clip(s, 0.0, 1.0)[:, None, None]
        return (1.0 - s) * self.cov_rtn[idx, i] + s * self.cov_rtn[idx, i + 1]

    def at_reference(self, t_ref: float, r_ref: np.ndarray, speed_ref: np.ndarray, sigma_ref_km: np.ndarray) -> None:
        """The correlator's prefilter inputs at ``t_ref`` (catalogue row-indexed, km, km/s), overwritten in
        place for the rows with a track: predicted position, speed and 3-D position sigma."""
        if len(self.rows) == 0:
            return
        idx = np.arange(len(self.rows))
        t = np.full(len(idx), float(t_ref))
        r, v = self.state(idx, t)
        cov = self.covariance(idx, t)
        r_ref[self.rows] = r
        speed_ref[self.rows] = np.linalg.norm(v, axis=-1)
        sigma_ref_km[self.rows] = np.sqrt(np.clip(np.trace(cov[:, :3, :3], axis1=1, axis2=2), 0.0, None)) / 1e3

    def measure(self, kind: str, obs: pd.DataFrame, t: np.ndarray, obj_rows: np.ndarray, r: np.ndarray,
                v: np.ndarray, sig: Mapping[str, np.ndarray], sigma_rtn_m: np.ndarray,
                fixed_rr_ms: float | None = None, light_time: bool = False) -> gate.Measured:
        """:func:`sda.orbit.correlation.gate.measure` of candidate pairs (observation ``p`` of ``obs`` against
        catalogue row ``obj_rows[p]``): the element set's prediction ``r``/``v`` with ``sigma_rtn_m`` for
        rows without a track, the track's state and full covariance for the others."""
        idx = self.index(obj_rows)
        tracked = idx >= 0
        d2, miss, logdet = np.full(len(t), np.nan), np.full(len(t), np.nan), np.full(len(t), np.nan)
        dof, residuals = np.zeros(len(t), dtype=int), {}
        for fused in (False, True):
            sel = np.flatnonzero(tracked == fused)
            if sel.size == 0:
                continue
            part_sig = {c: values[sel] for c, values in sig.items()}
            if fused:
                rs, vs = self.state(idx[sel], t[sel])
                got = gate.measure(kind, obs.iloc[sel], t[sel], rs, vs, part_sig, sigma_rtn_m[sel],
                                   cov_rtn6=self.covariance(idx[sel], t[sel]), light_time=light_time)
            else:
                got = gate.measure(kind, obs.iloc[sel], t[sel], r[sel], v[sel], part_sig, sigma_rtn_m[sel],
                                   fixed_rr_ms, light_time=light_time)
            d2[sel], miss[sel], dof[sel], logdet[sel] = got[0], got[1], got[3], got[4]
            for name, values in got[2].items():
                residuals.setdefault(name, np.full(len(t), np.nan))[sel] = values
        return d2, miss, residuals, dof, logdet


def from_results(results: Mapping[int, OdResult], start: float, end: float, step_s: float = STEP_S,
                 noise: ProcessNoise = ProcessNoise()) -> Tracks:
    """Tracks of the catalogue rows of ``results`` (row -> fused orbit, each with its epoch at or before
    ``start``) on the grid ``start, start + step_s, ...`` covering ``[start, end]``."""
    if end <= start:
        raise ValueError(f"tracks: end {end} must be after start {start}")
    grid = float(start) + step_s * np.arange(int(np.ceil((float(end) - float(start)) / step_s)) + 1)
    rows = np.array(sorted(results), dtype=np.int64)
    r = np.zeros((len(rows), len(grid), 3))
    v = np.zeros_like(r)
    cov = np.zeros((len(rows), len(grid), 6, 6))
    for k, row in enumerate(rows):
        result = results[int(row)]
        if result.epoch > grid[0] + 1e-6:
            raise ValueError(f"tracks: row {row}'s fused orbit has its epoch {result.epoch} after the start {start}")
        pred = predict(result, grid, noise)
        r[k], v[k] = pred.r_km, pred.v_kms
        cov[k] = rtn_covariance(pred.r_km, pred.v_kms, pred.covariance)
    return Tracks(rows, grid, r, v, cov)
