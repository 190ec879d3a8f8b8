"""Tracklets: one sensor's uncorrelated observations of one unknown object within a pass, linked.

The new-object search (:mod:`sda.orbit.acquisition.search`) has no orbit to gate observations against, so it
first links each sensor's observations in time order into tracklets by local motion alone. A sensor
samples every object it sees on one time grid, so several unknown objects (a fresh launch: a few
kilometres apart) interleave in its stream; each observation goes to the open tracklet that predicts it
best (greedy, smallest cost first, one observation per tracklet and time), or opens a new one:

* **radar** (a position from range, azimuth, elevation; the range-rate) and **ISL** (a TEME state):
  with two or more points the tracklet predicts the position (ISL: its last reported state; radar: a
  quadratic in time fitted to its last few positions, or with few, a line plus gravity's pull),
  gated at ``pos_gate_m``; for radar the range must also have moved by the mean reported range-rate
  (``range_gate_m``: ranges are far more precise than angles); with one radar point, only that and a
  bound orbital speed;
* **optical** (right ascension, declination): linear extrapolation of the last two directions, gated at
  ``angle_gate_rad``; with one point, any direction within ``max_rate_rad_s`` times the gap.

A tracklet closes after ``gap_s`` without a new point. The result depends only on the observations
(sorted by time, then ``obs_id``), not on how they arrived.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from sda.orbit import frames
from sda.orbit.estimation.iod import MU


@dataclasses.dataclass(frozen=True)
class TrackletSettings:
    gap_s: float = 120.0
    max_span_s: float = 1200.0  # a tracklet is cut after this long (ISL tracks run for hours)
    pos_gate_m: float = 4000.0
    range_gate_m: float = 600.0
    angle_gate_rad: float = 2e-4
    max_rate_rad_s: float = 0.03


def teme_positions(obs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per observation its TEME position [n, 3] and velocity [n, 3] (m, m/s; NaN where not measured):
    radar positions from range/azimuth/elevation at the site, ISL states as reported."""
    n = len(obs)
    r, v = np.full((n, 3), np.nan), np.full((n, 3), np.nan)
    kind = obs["sensor_kind"].to_numpy(str)
    t = (pd.to_datetime(obs["event_time"], utc=True) - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    radar = kind == "radar"
    if radar.any():
        o = obs[radar]
        ecef = frames.razel_to_ecef(o["range_m"].to_numpy(float) / 1000.0, o["az_rad"].to_numpy(float),
                                    o["el_rad"].to_numpy(float), o["site_lat_deg"].to_numpy(float),
                                    o["site_lon_deg"].to_numpy(float), o["site_alt_m"].to_numpy(float))
        r[radar] = frames.ecef_to_teme(ecef, np.zeros_like(ecef), t[radar])[0] * 1000.0
    isl = kind == "isl"
    if isl.any():
        r[isl] = obs.loc[isl, ["x_m", "y_m", "z_m"]].to_numpy(float)
        v[isl] = obs.loc[isl, ["vx_ms", "vy_ms", "vz_ms"]].to_numpy(float)
    return r, v


def _gravity(r: np.ndarray) -> np.ndarray:
    return -MU * r / np.linalg.norm(r) ** 3


def _radec_vec(ra: float, dec: float) -> np.ndarray:
    return np.array([np.cos(dec) * np.cos(ra), np.cos(dec) * np.sin(ra), np.sin(dec)])


FIT_POINTS = 10
#: a sensor's detections within this of the first of a frame are one frame (one detection per body): a radar
#: frame's detections differ by milliseconds (each its own light time), its frames by the cadence (10 s)
FRAME_S = 1.0
QUADRATIC_POINTS = 6  # fewer points fit a line (with gravity): three noisy points make a wild parabola


class _Track:
    def __init__(self, i: int, t: float):
        self.rows, self.times, self.opened = [i], [t], t


def _cost(track: _Track, i: int, t: np.ndarray, kind: str, data: dict, s: TrackletSettings) -> float:
    """How well the track predicts observation ``i`` (in gate units; inf outside the gate)."""
    j, dt = track.rows[-1], t[i] - track.times[-1]
    if kind == "optical":
        u_i = _radec_vec(data["ra"][i], data["dec"][i])
        u_j = _radec_vec(data["ra"][j], data["dec"][j])
        if len(track.rows) == 1:
            ang = float(np.arccos(np.clip(u_i @ u_j, -1.0, 1.0)))
            return ang / (s.max_rate_rad_s * dt) if ang <= s.max_rate_rad_s * dt else np.inf
        k = track.rows[-2]
        rate = (u_j - _radec_vec(data["ra"][k], data["dec"][k])) / (t[j] - t[k])
        pred = u_j + rate * dt
        miss = float(np.linalg.norm(u_i - pred / np.linalg.norm(pred)))
        return miss / s.angle_gate_rad if miss <= s.angle_gate_rad else np.inf
    r = data["r"]
    if kind == "isl" or len(track.rows) >= 2:
        miss = float(np.linalg.norm(r[i] - _predict(track, t, r, data["v"], kind, t[i])))
        cost = miss / s.pos_gate_m
        if kind == "radar":
            cost = max(cost, _range_miss(data, i, j, dt) / s.range_gate_m)
        return cost if cost <= 1.0 else np.inf
    speed = float(np.linalg.norm(r[i] - r[j]) / dt)
    rn = float(np.linalg.norm(r[j]))
    if not 0.5 * np.sqrt(MU / rn) <= speed <= np.sqrt(2.0 * MU / rn):
        return np.inf
    if np.isnan(data["rr"][i]) or np.isnan(data["rr"][j]):
        return 0.5  # no range-rate: a bound speed is all one point can check
    miss = _range_miss(data, i, j, dt)
    return miss / s.range_gate_m if miss <= s.range_gate_m else np.inf


def _range_miss(data: dict, i: int, j: int, dt: float) -> float:
    """How far the range of ``i`` is from that of ``j`` moved by their mean range-rate (0 without range-rates)."""
    rr = data["rr"]
    if np.isnan(rr[i]) or np.isnan(rr[j]):
        return 0.0
    return abs(data["rng"][i] - data["rng"][j] - (rr[i] + rr[j]) / 2.0 * dt)


def _predict(track: _Track, t: np.ndarray, r: np.ndarray, v: np.ndarray, kind: str, when: float) -> np.ndarray:
    """The track's position at ``when``: ISL, its last state moved on; radar, fitted to its last (at most
    :data:`FIT_POINTS`) positions: a quadratic in time, or with few points a line plus gravity's pull."""
    j = track.rows[-1]
    dt = when - t[j]
    if kind == "isl":
        return r[j] + v[j] * dt + _gravity(r[j]) * dt * dt / 2.0
    rows = track.rows[-FIT_POINTS:]
    tau = t[rows] - t[j]
    if len(rows) < QUADRATIC_POINTS:  # a straight line through the positions less gravity's pull
        g = _gravity(r[j])
        design = np.stack([np.ones_like(tau), tau], axis=1)
        coef = np.linalg.lstsq(design, r[rows] - 0.5 * np.outer(tau * tau, g), rcond=None)[0]
        return coef[0] + coef[1] * dt + 0.5 * g * dt * dt
    design = np.stack([np.ones_like(tau), tau, tau * tau], axis=1)
    coef = np.linalg.lstsq(design, r[rows], rcond=None)[0]
    return coef[0] + coef[1] * dt + coef[2] * dt * dt


def tracklets(obs: pd.DataFrame, settings: TrackletSettings = TrackletSettings()) -> np.ndarray:
    """Per observation, its tracklet number (numbered by first time, then sensor; module docstring)."""
    n = len(obs)
    if n == 0:
        return np.empty(0, np.int64)
    t = (pd.to_datetime(obs["event_time"], utc=True) - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy()
    r, v = teme_positions(obs)
    data = {"r": r, "v": v, "rng": obs.get("range_m", pd.Series(np.nan, index=obs.index)).to_numpy(float),
            "rr": obs.get("range_rate_ms", pd.Series(np.nan, index=obs.index)).to_numpy(float),
            "ra": obs.get("ra_rad", pd.Series(np.nan, index=obs.index)).to_numpy(float),
            "dec": obs.get("dec_rad", pd.Series(np.nan, index=obs.index)).to_numpy(float)}
    sensor, kind, ids = (obs[c].astype(str).to_numpy() for c in ("sensor_id", "sensor_kind", "obs_id"))
    label = np.full(n, -1, np.int64)
    tracks: list[_Track] = []
    for s_id in sorted(set(sensor)):
        rows = np.flatnonzero(sensor == s_id)
        rows = rows[np.lexsort((ids[rows], t[rows]))]
        _link_sensor(rows, t, kind, data, settings, tracks)
    firsts = sorted(range(len(tracks)), key=lambda k: (tracks[k].opened, sensor[tracks[k].rows[0]],
                                                       ids[tracks[k].rows[0]]))
    for number, k in enumerate(firsts):
        label[tracks[k].rows] = number
    return label


def _link_sensor(rows: np.ndarray, t: np.ndarray, kind: np.ndarray, data: dict, s: TrackletSettings,
                 tracks: list[_Track]) -> None:
    open_: list[_Track] = []
    start = 0
    while start < len(rows):
        stop = start
        while stop < len(rows) and t[rows[stop]] - t[rows[start]] < FRAME_S:  # one frame: a detection per body
            stop += 1
        now = t[rows[start]]
        open_ = [tr for tr in open_ if now - tr.times[-1] <= s.gap_s and now - tr.opened <= s.max_span_s]
        pairs = sorted((_cost(tr, i, t, kind[i], data, s), a, b) for a, tr in enumerate(open_)
                       for b, i in enumerate(rows[start:stop]))
        used_t, used_i = set(), set()
        for cost, a, b in pairs:
            if not np.isfinite(cost) or a in used_t or b in used_i:
                continue
            used_t.add(a)
            used_i.add(b)
            open_[a].rows.append(int(rows[start + b]))
            open_[a].times.append(float(t[rows[start + b]]))
        for b, i in enumerate(rows[start:stop]):
            if b not in used_i:
                track = _Track(int(i), float(t[i]))
                tracks.append(track)
                open_.append(track)
        start = stop
