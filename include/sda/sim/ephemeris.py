"""The truth's ephemeris: states on a regular time grid, interpolated exactly, burns included.

A state between grid times is the 8-point Lagrange polynomial through the nearest grid states (positions
and velocities alike): below 2 cm in LEO at a 120 s grid, against an integration stopped at that time
(tests/include/sim/test_sim_dynamics.py). An impulsive burn breaks the velocity: a polynomial across it would
smear the jump over the stencil, tens of metres near the burn. A body's burns are therefore kept as nodes
of their own (the state just before and just after, at the burn's time) and a time whose stencil reaches
a burn is interpolated from the nodes of its own segment only (between the burns around it).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

LAGRANGE_POINTS = 8


@dataclasses.dataclass
class Ephemeris:
    """True states of ``norad`` bodies on the grid ``t0 + k * step`` (TEME, km and km/s; NaN once a body
    has re-entered), with exact interpolation between grid times. ``burns``: (row, unix time, state
    before [6], state after [6]) of each impulsive burn, in time order."""

    norad: np.ndarray  # [n]
    t0: float
    step: float
    states: np.ndarray  # [n, k, 6]
    burns: list = dataclasses.field(default_factory=list)

    @property
    def t_end(self) -> float:
        return self.t0 + (self.states.shape[1] - 1) * self.step

    def rows(self, norad_ids) -> np.ndarray:
        index = {int(n): i for i, n in enumerate(self.norad)}
        return np.array([index[int(n)] for n in norad_ids], dtype=np.int64)

    def at(self, unix_s) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every body at times ``unix_s`` [t]: (error codes [n, t], r [n, t, 3] km, v [n, t, 3] km/s),
        as :func:`sda.orbit.frames.propagate` gives them: code 6 (SGP4's "decayed") and NaN where the
        body has re-entered, 7 and NaN outside the ephemeris."""
        t = np.atleast_1d(np.asarray(unix_s, dtype=float))
        inside = (t >= self.t0 - 1e-6) & (t <= self.t_end + 1e-6)
        idx, weights = _lagrange(self.t0, self.step, self.states.shape[1], np.where(inside, t, self.t0))
        out = np.einsum("tp,ntpc->ntc", weights, self.states[:, idx, :])
        for row in {b[0] for b in self.burns}:
            for j in np.flatnonzero(inside & self._near_burn(row, t)):
                out[row, j] = self._segment_state(row, float(t[j]))
        err = np.where(np.isfinite(out).all(axis=-1), 0, 6).astype(np.uint8)
        err[:, ~inside] = 7
        out[err != 0] = np.nan
        return err, out[..., :3], out[..., 3:]

    def at_pairs(self, index, unix_s) -> tuple[np.ndarray, np.ndarray]:
        """Body ``index[p]`` at time ``unix_s[p]`` for each pair: (r [p, 3] km, v [p, 3] km/s), NaN outside."""
        index = np.asarray(index, dtype=np.int64)
        t = np.asarray(unix_s, dtype=float)
        inside = (t >= self.t0 - 1e-6) & (t <= self.t_end + 1e-6)
        idx, weights = _lagrange(self.t0, self.step, self.states.shape[1], np.where(inside, t, self.t0))
        out = np.einsum("pq,pqc->pc", weights, self.states[index[:, None], idx, :])
        for row in {b[0] for b in self.burns}:
            for j in np.flatnonzero(inside & (index == row) & self._near_burn(row, t)):
                out[j] = self._segment_state(row, float(t[j]))
        out[~inside] = np.nan
        return out[:, :3], out[:, 3:]

    def _near_burn(self, row: int, t: np.ndarray) -> np.ndarray:
        reach = (LAGRANGE_POINTS // 2 + 1) * self.step
        times = np.array([b[1] for b in self.burns if b[0] == row])
        return (np.abs(t[:, None] - times[None, :]) < reach).any(axis=1)

    def _segment_state(self, row: int, t: float) -> np.ndarray:
        """The state at ``t`` from the nodes of its segment: the grid times strictly between the burns
        around it, the state after the burn before it and the state before the burn after it."""
        burns = [b for b in self.burns if b[0] == row]
        before = [b for b in burns if b[1] <= t]
        after = [b for b in burns if b[1] > t]
        lo = before[-1][1] if before else -np.inf
        hi = after[0][1] if after else np.inf
        grid = self.t0 + self.step * np.arange(self.states.shape[1])
        keep = (grid > lo) & (grid < hi)
        node_t, node_x = list(grid[keep]), list(self.states[row, keep])
        if before:
            node_t.insert(0, lo)
            node_x.insert(0, before[-1][3])
        if after:
            node_t.append(hi)
            node_x.append(after[0][2])
        node_t, node_x = np.array(node_t), np.array(node_x)
        pick = np.sort(np.argsort(np.abs(node_t - t), kind="stable")[:LAGRANGE_POINTS])
        x, y = node_t[pick], node_x[pick]
        weights = np.array([np.prod([(t - x[m]) / (x[j] - x[m]) for m in range(len(x)) if m != j])
                            for j in range(len(x))])
        return weights @ y

    def subset(self, rows) -> "Ephemeris":
        """The bodies at ``rows`` (in that order), their burns with them."""
        rows = [int(r) for r in rows]
        new_row = {old: new for new, old in enumerate(rows)}
        burns = [(new_row[b[0]], *b[1:]) for b in self.burns if b[0] in new_row]
        return Ephemeris(self.norad[rows], self.t0, self.step, self.states[rows], burns)

    def save(self, path: Path, **extra) -> None:
        """To ``path`` (.npz), with the burns and any ``extra`` arrays."""
        rows, times, before, after = _burn_arrays(self.burns)
        np.savez_compressed(path, norad=self.norad, t0=self.t0, step=self.step, states=self.states,
                            burn_rows=rows, burn_times=times, burn_before=before, burn_after=after, **extra)

    @classmethod
    def load(cls, path: Path, *extra: str) -> "Ephemeris | tuple":
        """The ephemeris :meth:`save` wrote to ``path``; with ``extra`` names, also those arrays (one read)."""
        with np.load(path) as data:
            burns = [(int(r), float(t), b, a) for r, t, b, a in
                     zip(data["burn_rows"], data["burn_times"], data["burn_before"], data["burn_after"])]
            eph = cls(data["norad"], float(data["t0"]), float(data["step"]), data["states"], burns)
            return (eph, *(data[name] for name in extra)) if extra else eph


def _burn_arrays(burns) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    if not burns:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros((0, 6)), np.zeros((0, 6))
    return (np.array([b[0] for b in burns], np.int64), np.array([b[1] for b in burns], float),
            np.array([b[2] for b in burns], float), np.array([b[3] for b in burns], float))


def _lagrange(t0: float, step: float, k: int, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Grid columns [t, P] and Lagrange weights [t, P] of the P nodes around each time (one-sided at the
    ends of the grid)."""
    p = min(LAGRANGE_POINTS, k)
    x = (t - t0) / step
    first = np.clip(np.floor(x).astype(np.int64) - (p // 2 - 1), 0, k - p)
    idx = first[:, None] + np.arange(p)[None, :]
    u = x[:, None] - idx  # distance to each node, in steps
    weights = np.ones((len(t), p))
    for j in range(p):
        for m in range(p):
            if m != j:
                weights[:, j] *= u[:, m] / (j - m)
    return idx, weights
